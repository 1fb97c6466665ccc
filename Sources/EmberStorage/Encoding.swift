import EmberCore

/// Order-preserving key encodings (byte order of encodings == Firebase order).
///
/// Path segment: an integer-group key (`KeyOrder.int32Value`) is
/// `0x01, Int32 with the sign bit flipped (big-endian, 4 bytes), UTF-8 length (2 bytes BE), bytes, 0x00`;
/// any other key is `0x02, text bytes, 0x00`, where text bytes are the UTF-8 bytes through
/// `KeyOrder.textOrderByte` (storage format 3), so that byte order is Firebase's UTF-16 order
/// (index string values are stored the same way). Valid keys never contain 0x00, so segment
/// encodings are prefix-free and a node's descendants sort right after the node and before its
/// next sibling. A path is the concatenation of its segments; the root is empty.
public enum KeyCodec {
    /// A key's segment: its sort key (`KeyOrder.appendSortKey`), so the tree's byte order is
    /// Firebase key order.
    public static func appendSegment(_ key: String, to out: inout [UInt8]) {
        KeyOrder.appendSortKey(key, to: &out)
    }

    /// `s`'s UTF-8 in text order (`KeyOrder.textOrderByte`); same length as its UTF-8.
    static func appendText(_ s: String, to out: inout [UInt8]) {
        for b in s.utf8 { out.append(KeyOrder.textOrderByte(b)) }
    }

    /// The string whose text-order bytes are `bytes` (the inverse of `appendText`).
    static func text<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
        // Written straight into the string's storage: decoding a lazy map took the
        // non-contiguous path (a dynamic cast and an array copy per key), a hot spot of exports.
        String(unsafeUninitializedCapacity: bytes.count) { buf in
            var n = 0
            for b in bytes {
                buf[n] = KeyOrder.textByte(fromOrderByte: b)
                n += 1
            }
            return n
        }
    }

    public static func encode(_ path: Path) -> [UInt8] {
        var out: [UInt8] = []
        for s in path.segments { appendSegment(s, to: &out) }
        return out
    }

    public static func segment(_ key: String) -> [UInt8] {
        var out: [UInt8] = []
        appendSegment(key, to: &out)
        return out
    }

    /// Reads one segment at `i` (advancing it); nil when malformed.
    static func readSegment(_ b: [UInt8], _ i: inout Int) -> String? {
        guard i < b.count else { return nil }
        switch b[i] {
        case 0x01:
            guard i + 7 <= b.count else { return nil }
            let len = Int(b[i + 5]) << 8 | Int(b[i + 6])
            let start = i + 7
            guard start + len < b.count, b[start + len] == 0 else { return nil }
            let s = String(decoding: b[start..<start + len], as: UTF8.self)
            i = start + len + 1
            return s
        case 0x02:
            var j = i + 1
            while j < b.count && b[j] != 0 { j += 1 }
            guard j < b.count else { return nil }
            let s = text(b[(i + 1)..<j])
            i = j + 1
            return s
        default:
            return nil
        }
    }

    /// Where the segment at `i` ends (past its terminator), checked as `readSegment` checks it,
    /// without making its string; nil when malformed.
    static func segmentEnd(_ b: [UInt8], at i: Int) -> Int? {
        guard i < b.count else { return nil }
        switch b[i] {
        case 0x01:
            guard i + 7 <= b.count else { return nil }
            let end = i + 7 + (Int(b[i + 5]) << 8 | Int(b[i + 6]))
            guard end < b.count, b[end] == 0 else { return nil }
            return end + 1
        case 0x02:
            var j = i + 1
            while j < b.count && b[j] != 0 { j += 1 }
            return j < b.count ? j + 1 : nil
        default:
            return nil
        }
    }

    /// Decodes consecutive segments from `start` to the end of `b`.
    public static func decodeSegments(_ b: [UInt8], from start: Int = 0) -> [String]? {
        var i = start
        var out: [String] = []
        while i < b.count {
            guard let s = readSegment(b, &i) else { return nil }
            out.append(s)
        }
        return out
    }

    /// The smallest byte string greater than every string that starts with `prefix`.
    static func prefixEnd(_ prefix: [UInt8]) -> [UInt8]? {
        var p = prefix
        while let last = p.last {
            if last < 0xFF { p[p.count - 1] = last + 1; return p }
            p.removeLast()
        }
        return nil
    }

    // MARK: - Index values

    /// Longest string prefix kept in an index key; longer strings form a group ordered by key
    /// inside the index and are re-sorted exactly when read.
    public static let indexStringBytes = 64

    /// Order-preserving encoding of an index value: null < false < true < numbers < strings < objects.
    /// Returns whether a string was truncated.
    @discardableResult
    static func appendIndexValue(_ v: IndexValue, to out: inout [UInt8]) -> Bool {
        switch v {
        case .null: out.append(0x10)
        case .bool(false): out.append(0x20)
        case .bool(true): out.append(0x30)
        case .number(let d):
            out.append(0x40)
            // Order-preserving double: flip sign bit of positives, all bits of negatives. -0 == 0.
            let bits = (d == 0 ? 0.0 : d).bitPattern
            let u = (bits & (1 << 63)) != 0 ? ~bits : bits | (1 << 63)
            for s in stride(from: 56, through: 0, by: -8) { out.append(UInt8((u >> UInt64(s)) & 0xFF)) }
        case .string(let s):
            out.append(0x50)
            var n = 0
            var truncated = false
            for b in s.utf8 {
                // At most `indexStringBytes` encoded bytes (escapes count), so keys stay bounded.
                if n >= indexStringBytes { truncated = true; break }
                // 0x00 escapes as 0x00 0xFF; the terminator is 0x00 0x01 (0x00 0x02 when truncated).
                if b == 0 { out.append(0); out.append(0xFF); n += 2 } else { out.append(KeyOrder.textOrderByte(b)); n += 1 }
            }
            out.append(0x00)
            out.append(truncated ? 0x02 : 0x01)
            return truncated
        case .object: out.append(0x60)
        }
        return false
    }

    // MARK: - Namespaces

    /// A namespace is 1–64 characters of `A–Z a–z 0–9 - _`; its key prefix is its bytes then 0x00.
    public static func validateNamespace(_ ns: String) throws(StorageError) {
        let u = ns.utf8
        guard !u.isEmpty, u.count <= 64, u.allSatisfy(isNamespaceByte) else { throw .invalidNamespace(ns) }
    }

    /// `A–Z a–z 0–9 - _`: the bytes of namespaces (and of writer ids, `WriterStamp`).
    public static func isNamespaceByte(_ b: UInt8) -> Bool {
        (b >= 48 && b <= 57) || (b >= 65 && b <= 90) || (b >= 97 && b <= 122) || b == 45 || b == 95
    }

    static func namespacePrefix(_ ns: String) -> [UInt8] {
        var out = Array(ns.utf8)
        out.append(0)
        return out
    }
}

// MARK: - Binary value codec (exact: int64 vs double vs bool vs string)

struct ByteWriter {
    var bytes: [UInt8] = []

    init(bytes: [UInt8] = []) { self.bytes = bytes }

    /// Room for `capacity` bytes up front: a record built by appends would otherwise grow its
    /// buffer (allocate and copy) a few times on the way to its size.
    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    mutating func u8(_ v: UInt8) { bytes.append(v) }
    mutating func u64(_ v: UInt64) {
        withUnsafeBytes(of: v.bigEndian) { bytes.append(contentsOf: $0) }
    }
    mutating func i64(_ v: Int64) { u64(UInt64(bitPattern: v)) }
    mutating func f64(_ v: Double) { u64(v.bitPattern) }
    mutating func varint(_ v: Int) {
        var x = UInt64(v)
        while x >= 0x80 { bytes.append(UInt8(x & 0x7F) | 0x80); x >>= 7 }
        bytes.append(UInt8(x))
    }
    /// The most bytes `string(s)` writes: a varint length (at most 10 bytes) and the UTF-8.
    static func stringBound(_ s: String) -> Int { 10 + s.utf8.count }

    mutating func string(_ s: String) {
        varint(s.utf8.count)
        bytes.append(contentsOf: s.utf8)
    }

    /// A path as `string(path.description)` writes it (`/` then the keys joined by `/`), without
    /// building the joined string: every trigger event's location is written so, per replica.
    mutating func path(_ p: Path) {
        let keys = p.segments
        var n = keys.isEmpty ? 1 : keys.count
        for k in keys { n += k.utf8.count }
        varint(n)
        if keys.isEmpty { bytes.append(0x2F); return }
        for k in keys {
            bytes.append(0x2F)
            bytes.append(contentsOf: k.utf8)
        }
    }

    mutating func priority(_ p: Priority?) {
        switch p {
        case nil: u8(0)
        case .number(let d)?: u8(1); f64(d)
        case .string(let s)?: u8(2); string(s)
        }
    }

    /// JSON, deterministically: object keys in Firebase key order.
    mutating func json(_ j: JSON) {
        switch j {
        case .null: u8(0)
        case .bool(let b): u8(b ? 2 : 1)
        case .int(let i): u8(3); i64(i)
        case .double(let d): u8(4); f64(d)
        case .string(let s): u8(5); string(s)
        case .array(let a):
            u8(6); varint(a.count)
            for e in a { json(e) }
        case .object(let o):
            u8(7); varint(o.count)
            for (k, v) in KeyOrder.sortedByKey(o) { string(k); json(v) }
        }
    }
}

struct ByteReader {
    let bytes: [UInt8]
    var i: Int

    init(_ bytes: [UInt8], at i: Int = 0) { self.bytes = bytes; self.i = i }

    var atEnd: Bool { i >= bytes.count }

    mutating func u8() throws(StorageError) -> UInt8 {
        guard i < bytes.count else { throw .corrupt("truncated") }
        defer { i += 1 }
        return bytes[i]
    }
    mutating func u64() throws(StorageError) -> UInt64 {
        guard i + 8 <= bytes.count else { throw .corrupt("truncated") }
        var v: UInt64 = 0
        for k in 0..<8 { v = (v << 8) | UInt64(bytes[i + k]) }
        i += 8
        return v
    }
    mutating func i64() throws(StorageError) -> Int64 { Int64(bitPattern: try u64()) }
    mutating func f64() throws(StorageError) -> Double { Double(bitPattern: try u64()) }
    mutating func varint() throws(StorageError) -> Int {
        var x: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try u8()
            x |= UInt64(b & 0x7F) << shift
            if b < 0x80 { break }
            shift += 7
            guard shift < 63 else { throw .corrupt("varint") }
        }
        guard x <= UInt64(Int32.max) * 16 else { throw .corrupt("length") }
        return Int(x)
    }
    mutating func string() throws(StorageError) -> String {
        let n = try varint()
        guard i + n <= bytes.count else { throw .corrupt("truncated string") }
        defer { i += n }
        return String(decoding: bytes[i..<i + n], as: UTF8.self)
    }

    /// A path written as a string (`ByteWriter.string` of its slash form), split at the byte 0x2F
    /// as it is read: the same path as `Path(string())` (a "/" byte is never inside a UTF-8
    /// sequence, nor inside a replaced invalid one, so splitting first gives the same keys),
    /// without the whole string and its substrings in between (every replicated entry's paths
    /// are read here; that was ~9 % of a follower's Raft thread under pipelined load).
    mutating func path() throws(StorageError) -> Path {
        let n = try varint()
        guard i + n <= bytes.count else { throw .corrupt("truncated string") }
        defer { i += n }
        var segments: [String] = []
        segments.reserveCapacity(8)
        var start = i
        for k in i...(i + n) where k == i + n || bytes[k] == UInt8(ascii: "/") {
            if k > start { segments.append(String(decoding: bytes[start..<k], as: UTF8.self)) }
            start = k + 1
        }
        do { return try Path(validating: segments) } catch { throw .corrupt("log entry path") }
    }

    mutating func leaf() throws(StorageError) -> Leaf {
        switch try u8() {
        case 1: return .bool(false)
        case 2: return .bool(true)
        case 3: return .int(try i64())
        case 4: return .double(try f64())
        case 5: return .string(try string())
        case let t: throw .corrupt("leaf tag \(t)")
        }
    }

    mutating func priority() throws(StorageError) -> Priority? {
        switch try u8() {
        case 0: return nil
        case 1: return .number(try f64())
        case 2: return .string(try string())
        case let t: throw .corrupt("priority tag \(t)")
        }
    }

    mutating func json(depth: Int = 0) throws(StorageError) -> JSON {
        guard depth <= Limits.maxJSONDepth + 2 else { throw .corrupt("json depth") }
        switch try u8() {
        case 0: return .null
        case 1: return .bool(false)
        case 2: return .bool(true)
        case 3: return .int(try i64())
        case 4: return .double(try f64())
        case 5: return .string(try string())
        case 6:
            let n = try varint()
            guard n <= bytes.count - i else { throw .corrupt("array length") }
            var a: [JSON] = []
            a.reserveCapacity(n)
            for _ in 0..<n { a.append(try json(depth: depth + 1)) }
            return .array(a)
        case 7:
            let n = try varint()
            guard n <= bytes.count - i else { throw .corrupt("object length") }
            var o: KeyMap<JSON> = [:]
            o.reserveCapacity(n)
            for _ in 0..<n {
                let k = try string()
                o[k] = try json(depth: depth + 1)
            }
            return .object(o)
        case let t: throw .corrupt("json tag \(t)")
        }
    }
}

/// Tree record values: a leaf (value and priority) or an interior node's priority.
///
/// A leaf written at its own path (tag 3) also carries that write's log index, its version:
/// the version row it would need otherwise sits in another table, on another page, so a small
/// write would dirty two B-tree leaves instead of one. Leaves written as part of an object
/// (tag 1) have none: their version is their ancestor's.
///
/// A small object written whole (tag 4) is one record: `InlineObject`.
enum TreeRecord {
    case leaf(Leaf, Priority?)
    case priority(Priority)
    case inline(InlineObject)

    static func decode(_ b: [UInt8]) throws(StorageError) -> TreeRecord {
        var r = ByteReader(b)
        switch try r.u8() {
        case 1, 3:
            let l = try r.leaf()
            return .leaf(l, try r.priority())
        case 2:
            guard let p = try r.priority() else { throw .corrupt("empty priority record") }
            return .priority(p)
        case InlineObject.tag:
            return .inline(try InlineObject.decode(b))
        case let t: throw .corrupt("tree record tag \(t)")
        }
    }

    var encoded: [UInt8] {
        var w: ByteWriter
        switch self {
        case .leaf(let l, let p):
            w = ByteWriter(capacity: 1 + l.encodedSizeEstimate + Self.sizeEstimate(p))
            w.u8(1); w.leaf(l); w.priority(p)
        case .priority(let p):
            w = ByteWriter(capacity: 1 + Self.sizeEstimate(p))
            w.u8(2); w.priority(p)
        case .inline(let o): return o.encoded
        }
        return w.bytes
    }

    /// A leaf record that keeps `version` (tag 3; the version is the last 8 bytes).
    static func leaf(_ l: Leaf, _ p: Priority?, version: UInt64) -> [UInt8] {
        var w = ByteWriter(capacity: 9 + l.encodedSizeEstimate + Self.sizeEstimate(p))
        w.u8(3); w.leaf(l); w.priority(p); w.u64(version)
        return w.bytes
    }

    /// The version a leaf or inline object record keeps (nil for other records).
    static func version(_ b: [UInt8]) throws(StorageError) -> UInt64? {
        if b.first == InlineObject.tag { return try InlineObject.version(b) }
        guard b.first == 3 else { return nil }
        guard b.count >= 9 else { throw .corrupt("short leaf record") }
        var r = ByteReader(Array(b[(b.count - 8)...]))
        return try r.u64()
    }
}

extension TreeRecord {
    /// At least the bytes `ByteWriter.priority` writes for `p` (what a record reserves).
    static func sizeEstimate(_ p: Priority?) -> Int {
        switch p {
        case nil: return 1
        case .number?: return 9
        case .string(let s)?: return 1 + ByteWriter.stringBound(s)
        }
    }
}

extension Leaf {
    /// At least the bytes `ByteWriter.leaf` writes for this leaf (exact for numbers and
    /// booleans; a string's UTF-8 count plus room for its tag and length): what a record reserves.
    var encodedSizeEstimate: Int {
        switch self {
        case .bool: return 1
        case .int, .double: return 9
        case .string(let s): return 1 + ByteWriter.stringBound(s)
        }
    }
}
