/// A location in the tree: validated keys from the root. `Path.root` has no segments.
public struct Path: Sendable, Hashable, CustomStringConvertible, Comparable {
    public private(set) var segments: [String]

    public static let root = Path(validated: [])

    /// Trusted constructor: segments must already satisfy `Key.validate`.
    public init(validated segments: [String]) {
        self.segments = segments
    }

    /// Parses a slash-separated path ("/a/b", "a/b/", "") and validates every key and the depth.
    /// Empty segments are ignored, as Firebase does for `//` and trailing slashes.
    public init(_ string: String) throws(EmberError) {
        try self.init(validating: Path.slashSegments(string).map(String.init))
    }

    /// Keys already split at "/" (empty ones dropped), each checked with `Key.validate`, and
    /// their depth: what every parse of a path ends with, from a string or from stored bytes.
    public init(validating segments: [String]) throws(EmberError) {
        for key in segments { try Key.validate(key) }
        guard segments.count <= Limits.maxPathDepth else { throw .pathTooDeep(depth: segments.count) }
        self.segments = segments
    }

    /// The parts of `s` between slashes, split at the byte 0x2F of its UTF-8 rather than by
    /// Character: a key may start with a combining mark, which Swift joins with the slash before
    /// it into one Character, so a Character split would not see that slash (found by
    /// `FuzzPath`). In UTF-8 that byte is always a whole "/" scalar, so every cut is a scalar
    /// boundary; bytes, unlike a generic split over scalars, cost no per-call generic lookups
    /// (this runs for every request's path).
    public static func slashSegments(_ s: Substring) -> [Substring] {
        var out: [Substring] = []
        out.reserveCapacity(8)  // one allocation for typical depths, not one per doubling
        let u = s.utf8
        var start = u.startIndex
        var i = start
        while i != u.endIndex {
            if u[i] == UInt8(ascii: "/") {
                if start != i { out.append(s[start..<i]) }
                start = u.index(after: i)
            }
            i = u.index(after: i)
        }
        if start != u.endIndex { out.append(s[start..<u.endIndex]) }
        return out
    }

    public static func slashSegments(_ s: String) -> [Substring] { slashSegments(s[...]) }

    public var isRoot: Bool { segments.isEmpty }
    public var count: Int { segments.count }
    public var first: String? { segments.first }
    public var last: String? { segments.last }
    public var key: String? { segments.last }

    public var parent: Path? {
        isRoot ? nil : Path(validated: Array(segments.dropLast()))
    }

    /// The path without its first segment.
    public var dropFirst: Path { Path(validated: Array(segments.dropFirst())) }

    public func child(_ key: String) -> Path {
        Path(validated: segments + [key])
    }

    public func appending(_ other: Path) -> Path {
        Path(validated: segments + other.segments)
    }

    /// True when `self` is `other` or an ancestor of it.
    public func contains(_ other: Path) -> Bool {
        other.segments.count >= segments.count && other.segments.starts(with: segments, by: { $0.isExactly($1) })
    }

    /// Segment bytes, not Swift's canonical equivalence: `/a/\u{E9}` and `/a/e\u{301}` are two
    /// locations (`ExactKey`).
    public static func == (a: Path, b: Path) -> Bool {
        a.segments.elementsEqual(b.segments, by: { $0.isExactly($1) })
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(segments.count)
        for s in segments { hasher.combine(ExactKey(s)) }
    }

    /// `other` relative to `self`, when `self.contains(other)`.
    public func relative(_ other: Path) -> Path? {
        guard contains(other) else { return nil }
        return Path(validated: Array(other.segments.dropFirst(segments.count)))
    }

    public var description: String { "/" + segments.joined(separator: "/") }

    /// Firebase path order: segment by segment in key order; a prefix sorts first.
    /// Bytes whose plain order is path order (`<`): its keys' `KeyOrder.appendSortKey` one after
    /// another. Made once per path, they sort many paths without parsing keys per comparison.
    public var sortKey: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(segments.reduce(0) { $0 + $1.utf8.count + 8 })
        for s in segments { KeyOrder.appendSortKey(s, to: &out) }
        return out
    }

    public static func < (lhs: Path, rhs: Path) -> Bool {
        for (a, b) in zip(lhs.segments, rhs.segments) {
            let c = KeyOrder.compare(a, b)
            if c != 0 { return c < 0 }
        }
        return lhs.segments.count < rhs.segments.count
    }
}

/// Key rules: non-empty, at most 768 UTF-8 bytes, none of `. $ # [ ] /` or ASCII 0–31 and 127.
public enum Key {
    public static func validate(_ key: String) throws(EmberError) {
        if key.isEmpty { throw .invalidKey(key: key, reason: "keys must be non-empty") }
        let bytes = key.utf8.count
        if bytes > Limits.maxKeyBytes { throw .keyTooLong(bytes: bytes) }
        // Every key of every write and import comes here: one pass over the contiguous bytes
        // (walking the UTF8View was a visible share of an import's CPU); the walk below only
        // names what is wrong.
        if key.utf8.withContiguousStorageIfAvailable({ !$0.contains(where: isForbidden) }) == true { return }
        for b in key.utf8 {
            switch b {
            case UInt8(ascii: "."), UInt8(ascii: "$"), UInt8(ascii: "#"), UInt8(ascii: "["),
                UInt8(ascii: "]"), UInt8(ascii: "/"):
                throw .invalidKey(key: key, reason: "keys must not contain '.', '$', '#', '[', ']' or '/'")
            case 0...31, 127:
                throw .invalidKey(key: key, reason: "keys must not contain ASCII control characters")
            default: continue
            }
        }
    }

    /// The bytes no key holds: `. $ # [ ] /`, ASCII 0–31 and 127.
    @inline(__always)
    static func isForbidden(_ b: UInt8) -> Bool {
        b < 0x20 || b == 0x7F || b == 0x2E || b == 0x24 || b == 0x23 || b == 0x5B || b == 0x5D || b == 0x2F
    }

    public static func isValid(_ key: String) -> Bool {
        do { try validate(key); return true } catch { return false }
    }
}
