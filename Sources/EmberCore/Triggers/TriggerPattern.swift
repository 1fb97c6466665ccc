/// A trigger's path pattern in Firebase's syntax: `/messages/{pushId}/likes/{uid}`. Each segment
/// is a literal key or a `{name}` wildcard matching exactly one key. A write below a matching
/// location changes that location; a write above it may change many locations.
public struct TriggerPattern: Sendable, Equatable, CustomStringConvertible {
    public enum Segment: Sendable, Equatable {
        case literal(String)
        case wildcard(String)
    }

    public let segments: [Segment]
    /// How many segments are wildcards: the size of every match's params (reserved at once:
    /// a dictionary grown key by key reallocates and rehashes, per change on every replica).
    let wildcards: Int
    /// The wildcards' segment indexes in name order: the order a match's params are stored in
    /// (`TriggerEvent.forEachParam`), known once instead of sorted per event.
    public let wildcardOrder: [Int]

    /// Named limit: wildcard names are short identifiers.
    public static let maxWildcardNameBytes = 64

    public init(parsing text: String) throws(TriggerDefinitionError) {
        guard text.hasPrefix("/") else { throw .init("path must start with '/'") }
        var out: [Segment] = []
        var names: Set<String> = []
        for raw in Path.slashSegments(text) {
            let s = String(raw)
            if s.hasPrefix("{") || s.hasSuffix("}") {
                guard s.count >= 3, s.hasPrefix("{"), s.hasSuffix("}") else {
                    throw .init("path segment \"\(s.prefix(80))\" is not a {wildcard}")
                }
                let name = String(s.dropFirst().dropLast())
                guard Self.isWildcardName(name) else {
                    throw .init("wildcard name \"\(name.prefix(80))\" must be letters, digits and _ (at most \(Self.maxWildcardNameBytes) bytes), not starting with a digit")
                }
                guard names.insert(name).inserted else { throw .init("wildcard {\(name)} appears twice") }
                out.append(.wildcard(name))
            } else {
                do { try Key.validate(s) } catch { throw .init("path: \(error)") }
                out.append(.literal(s))
            }
        }
        guard out.count <= Limits.maxPathDepth else { throw .init("path is deeper than \(Limits.maxPathDepth) keys") }
        segments = out
        wildcards = names.count
        wildcardOrder = out.indices.filter { if case .wildcard = out[$0] { return true } else { return false } }
            .sorted { Self.name(out[$0]) < Self.name(out[$1]) }
    }

    private static func name(_ s: Segment) -> String {
        switch s {
        case .wildcard(let n), .literal(let n): return n
        }
    }

    /// The name of the wildcard at segment `i` (one of `wildcardOrder`).
    public func wildcardName(_ i: Int) -> String {
        guard case .wildcard(let n) = segments[i] else { preconditionFailure("segment \(i) is not a wildcard") }
        return n
    }

    static func isWildcardName(_ s: String) -> Bool {
        guard let first = s.utf8.first, s.utf8.count <= maxWildcardNameBytes, !(48...57).contains(first) else { return false }
        return s.utf8.allSatisfy { (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) || $0 == 95 }
    }

    public var count: Int { segments.count }

    public var description: String {
        "/" + segments.map { if case .wildcard(let n) = $0 { return "{\(n)}" } else if case .literal(let k) = $0 { return k } else { return "" } }
            .joined(separator: "/")
    }

    func segmentMatches(_ i: Int, _ key: String) -> Bool {
        if case .literal(let k) = segments[i] { return k.isExactly(key) }
        return true
    }

    /// The wildcard values when `path` is a location of this pattern (same depth), else nil.
    public func match(_ path: Path) -> [String: String]? {
        guard path.count == count else { return nil }
        var params = [String: String](minimumCapacity: wildcards)
        for (i, key) in path.segments.enumerated() {
            switch segments[i] {
            case .literal(let k): if !k.isExactly(key) { return nil }
            case .wildcard(let n): params[n] = key
            }
        }
        return params
    }

    /// Whether the first `path.count` segments (at most `count`) match: a write at `path` can
    /// change locations of this pattern.
    public func matchesPrefix(_ path: Path) -> Bool {
        guard path.count <= count else { return false }
        for (i, key) in path.segments.enumerated() where !segmentMatches(i, key) { return false }
        return true
    }

    /// Whether the path's keys match the pattern's as far as both go: a write at `path` can
    /// change locations of this pattern (at, above or below one; `scope(of:)` without the scope).
    public func matchesLeading(_ path: Path) -> Bool {
        for (i, key) in path.segments.prefix(count).enumerated() where !segmentMatches(i, key) { return false }
        return true
    }

    /// The part of the tree a write at `path` can change, as far as this pattern sees it: the
    /// location the write lies at or below, or the write's own path when it lies above
    /// locations; nil when the write cannot change any location.
    public func scope(of path: Path) -> Path? {
        if path.count <= count { return matchesPrefix(path) ? path : nil }
        let location = Path(validated: Array(path.segments.prefix(count)))
        return matchesPrefix(location) ? location : nil
    }
}

/// Why a trigger definition was refused (the 400's reason).
public struct TriggerDefinitionError: Error, Sendable, Equatable, CustomStringConvertible {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}
