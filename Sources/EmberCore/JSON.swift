/// A parsed JSON document. Integers that fit in 64 bits stay exact; all other numbers are doubles.
/// Objects keep the last value of a repeated key.
public enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object(KeyMap<JSON>)

    public static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.string(a), .string(b)): return a.isExactly(b)  // bytes, not canonical equivalence
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)): return a == b
        case let (.int(a), .int(b)): return a == b
        case let (.int(a), .double(b)), let (.double(b), .int(a)): return Double(a) == b
        case let (.double(a), .double(b)): return a == b
        default: return false
        }
    }

    public subscript(key: String) -> JSON? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    public var isNull: Bool { if case .null = self { return true } else { return false } }
    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    public var objectValue: KeyMap<JSON>? { if case .object(let o) = self { return o } else { return nil } }
    public var numberValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }
    public var isPrimitive: Bool {
        switch self {
        case .array, .object: return false
        default: return true
        }
    }

    /// Parses UTF-8 JSON text. Rejects trailing garbage, NaN/Infinity, invalid UTF-8 and nesting
    /// deeper than `maxDepth`.
    public static func parse<C: Collection>(_ bytes: C, maxDepth: Int = Limits.maxJSONDepth) throws(EmberError) -> JSON
    where C.Element == UInt8 {
        var parser = JSONParser(bytes: bytes as? [UInt8] ?? Array(bytes), maxDepth: maxDepth)
        return try parser.parseDocument()
    }

    public static func parse(_ text: String, maxDepth: Int = Limits.maxJSONDepth) throws(EmberError) -> JSON {
        // One copy of the text (every wire message and REST body comes here).
        var parser = JSONParser(bytes: Array(text.utf8), maxDepth: maxDepth)
        return try parser.parseDocument()
    }

    /// Compact serialization; object keys in Firebase key order so output is deterministic.
    public func serialized(pretty: Bool = false) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        JSONWriter.write(self, into: &out, pretty: pretty, indent: 0)
        return String(decoding: out, as: UTF8.self)
    }

    public func serializedBytes(pretty: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        JSONWriter.write(self, into: &out, pretty: pretty, indent: 0)
        return out
    }

    /// Compact JSON with each object's members in whatever order it holds them (not sorted: the
    /// same value, other bytes), for a receiver that parses it back into a value (`ember import`'s
    /// request bodies: sorting every object's keys was ~7 % of its CPU).
    public func unorderedBytes() -> [UInt8] {
        var out: [UInt8] = []
        JSONWriter.write(self, into: &out, pretty: false, indent: 0, sortKeys: false)
        return out
    }
}

/// JSON's one-character escapes (`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`), shared by every
/// JSON reader in Ember (the data parser here, the rules file reader in EmberRules).
public enum JSONEscape {
    /// The byte that `\` followed by `c` stands for, or nil when `c` is not a one-character escape.
    @inlinable
    public static func simple(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "\""): return 0x22
        case UInt8(ascii: "\\"): return 0x5C
        case UInt8(ascii: "/"): return 0x2F
        case UInt8(ascii: "b"): return 0x08
        case UInt8(ascii: "f"): return 0x0C
        case UInt8(ascii: "n"): return 0x0A
        case UInt8(ascii: "r"): return 0x0D
        case UInt8(ascii: "t"): return 0x09
        default: return nil
        }
    }
}

struct JSONParser {
    let bytes: [UInt8]
    let maxDepth: Int
    var i = 0
    /// Where the text ends: `bytes.count`, or the end of one value's text inside a larger
    /// buffer (a log entry's part, `Node(jsonText:)`), read in place.
    let end: Int

    init(bytes: [UInt8], maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
        self.end = bytes.count
    }

    /// The text `bytes[range]`, read in place (no copy of the buffer).
    init(bytes: [UInt8], range: Range<Int>, maxDepth: Int) {
        precondition(range.lowerBound >= 0 && range.upperBound <= bytes.count, "range outside the buffer")
        self.bytes = bytes
        self.maxDepth = maxDepth
        self.i = range.lowerBound
        self.end = range.upperBound
    }

    mutating func parseDocument() throws(EmberError) -> JSON {
        skipWhitespace()
        let v = try parseValue(depth: 0)
        skipWhitespace()
        guard i == end else { throw fail("trailing characters") }
        return v
    }

    func fail(_ why: String) -> EmberError { .invalidJSON("\(why) at byte \(i)") }

    mutating func skipWhitespace() {
        while i < end {
            switch bytes[i] {
            case 0x20, 0x09, 0x0A, 0x0D: i += 1
            default: return
            }
        }
    }

    mutating func parseValue(depth: Int) throws(EmberError) -> JSON {
        guard i < end else { throw fail("unexpected end") }
        switch bytes[i] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expect("true"); return .bool(true)
        case UInt8(ascii: "f"): try expect("false"); return .bool(false)
        case UInt8(ascii: "n"): try expect("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character")
        }
    }

    mutating func expect(_ word: StaticString) throws(EmberError) {
        let w = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        guard i + w.count <= end else { throw fail("unexpected end") }
        for (k, b) in w.enumerated() where bytes[i + k] != b { throw fail("bad literal") }
        i += w.count
    }

    mutating func parseObject(depth: Int) throws(EmberError) -> JSON {
        guard depth <= maxDepth else { throw fail("nesting too deep") }
        i += 1
        skipWhitespace()
        if i < end && bytes[i] == UInt8(ascii: "}") { i += 1; return .object([:]) }
        // Most objects are small (wire envelopes have 2–4 keys): one allocation, no regrowth.
        var result = KeyMap<JSON>(minimumCapacity: 4)
        while true {
            skipWhitespace()
            guard i < end, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected key") }
            let key = try parseString()
            skipWhitespace()
            guard i < end, bytes[i] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            i += 1
            skipWhitespace()
            result[key] = try parseValue(depth: depth)
            skipWhitespace()
            guard i < end else { throw fail("unexpected end") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(result) }
            throw fail("expected ',' or '}'")
        }
    }

    mutating func parseArray(depth: Int) throws(EmberError) -> JSON {
        guard depth <= maxDepth else { throw fail("nesting too deep") }
        i += 1
        var result: [JSON] = []
        skipWhitespace()
        if i < end && bytes[i] == UInt8(ascii: "]") { i += 1; return .array(result) }
        while true {
            skipWhitespace()
            result.append(try parseValue(depth: depth))
            skipWhitespace()
            guard i < end else { throw fail("unexpected end") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(result) }
            throw fail("expected ',' or ']'")
        }
    }

    mutating func parseString() throws(EmberError) -> String {
        i += 1  // opening quote
        let start = i
        var ascii = true
        // Fast path: no escapes.
        while i < end {
            let c = bytes[i]
            if c == UInt8(ascii: "\"") {
                let end = i
                i += 1
                // Through a buffer pointer, not a generic slice: this runs for every key and
                // string of every request. ASCII needs no validation; anything else must be
                // valid UTF-8 (refused, not repaired).
                let s: String? = bytes.withUnsafeBufferPointer { all in
                    let run = UnsafeBufferPointer(rebasing: all[start..<end])
                    return ascii ? String(decoding: run, as: UTF8.self) : String(validating: run, as: UTF8.self)
                }
                guard let s else { throw fail("invalid UTF-8") }
                return s
            }
            if c == UInt8(ascii: "\\") { break }
            if c < 0x20 { throw fail("control character in string") }
            if c >= 0x80 { ascii = false }
            i += 1
        }
        var buf = Array(bytes[start..<i])
        while i < end {
            let c = bytes[i]
            if c == UInt8(ascii: "\"") {
                i += 1
                guard let s = String(validating: buf, as: UTF8.self) else { throw fail("invalid UTF-8") }
                return s
            }
            if c < 0x20 { throw fail("control character in string") }
            if c != UInt8(ascii: "\\") { buf.append(c); i += 1; continue }
            i += 1
            guard i < end else { break }
            let e = bytes[i]
            i += 1
            if let simple = JSONEscape.simple(e) { buf.append(simple); continue }
            switch e {
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if scalar >= 0xD800 && scalar < 0xDC00 {
                    // A high surrogate must be followed by an escaped low surrogate.
                    guard i + 1 < end, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u")
                    else { throw fail("lone surrogate") }
                    i += 2
                    let low = try hex4()
                    guard low >= 0xDC00 && low < 0xE000 else { throw fail("lone surrogate") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if scalar >= 0xDC00 && scalar < 0xE000 {
                    throw fail("lone surrogate")
                }
                guard let u = Unicode.Scalar(scalar) else { throw fail("bad escape") }
                buf.append(contentsOf: Array(String(Character(u)).utf8))
            default: throw fail("bad escape")
            }
        }
        throw fail("unterminated string")
    }

    mutating func hex4() throws(EmberError) -> UInt32 {
        guard i + 4 <= end else { throw fail("bad \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[i]
            let d: UInt32
            switch c {
            case 48...57: d = UInt32(c - 48)
            case 65...70: d = UInt32(c - 55)
            case 97...102: d = UInt32(c - 87)
            default: throw fail("bad \\u escape")
            }
            v = v * 16 + d
            i += 1
        }
        return v
    }

    mutating func parseNumber() throws(EmberError) -> JSON {
        let start = i
        if bytes[i] == UInt8(ascii: "-") { i += 1 }
        guard i < end, isDigit(bytes[i]) else { throw fail("bad number") }
        if bytes[i] == UInt8(ascii: "0") {
            i += 1
        } else {
            while i < end, isDigit(bytes[i]) { i += 1 }
        }
        var isInteger = true
        if i < end, bytes[i] == UInt8(ascii: ".") {
            isInteger = false
            i += 1
            guard i < end, isDigit(bytes[i]) else { throw fail("bad number") }
            while i < end, isDigit(bytes[i]) { i += 1 }
        }
        if i < end, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            isInteger = false
            i += 1
            if i < end, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard i < end, isDigit(bytes[i]) else { throw fail("bad number") }
            while i < end, isDigit(bytes[i]) { i += 1 }
        }
        let text = String(decoding: bytes[start..<i], as: UTF8.self)
        if isInteger, let v = Int64(text) { return .int(v) }
        // Integers beyond 64 bits (Python sends 2**63 unchanged) become doubles.
        guard let d = Double(text), d.isFinite else { throw fail("number out of range") }
        return .double(d)
    }

    func isDigit(_ c: UInt8) -> Bool { c >= 48 && c <= 57 }
}

enum JSONWriter {
    static func write(_ v: JSON, into out: inout [UInt8], pretty: Bool, indent: Int, sortKeys: Bool = true) {
        switch v {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let i): out.append(contentsOf: String(i).utf8)
        case .double(let d): out.append(contentsOf: formatDouble(d).utf8)
        case .string(let s): writeString(s, into: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (k, e) in a.enumerated() {
                if k > 0 { out.append(UInt8(ascii: ",")) }
                if pretty { newline(&out, indent + 1) }
                write(e, into: &out, pretty: pretty, indent: indent + 1, sortKeys: sortKeys)
            }
            if pretty && !a.isEmpty { newline(&out, indent) }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            if !sortKeys {
                for (k, (key, value)) in o.enumerated() {
                    if k > 0 { out.append(UInt8(ascii: ",")) }
                    if pretty { newline(&out, indent + 1) }
                    writeString(key, into: &out)
                    out.append(contentsOf: (pretty ? " : " : ":").utf8)
                    write(value, into: &out, pretty: pretty, indent: indent + 1, sortKeys: false)
                }
            } else {
                let keys = o.keys.sorted(by: KeyOrder.less)
                for (k, key) in keys.enumerated() {
                    if k > 0 { out.append(UInt8(ascii: ",")) }
                    if pretty { newline(&out, indent + 1) }
                    writeString(key, into: &out)
                    out.append(contentsOf: (pretty ? " : " : ":").utf8)
                    write(o[key]!, into: &out, pretty: pretty, indent: indent + 1)
                }
            }
            if pretty && !o.isEmpty { newline(&out, indent) }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func newline(_ out: inout [UInt8], _ indent: Int) {
        out.append(0x0A)
        for _ in 0..<indent { out.append(contentsOf: "  ".utf8) }
    }

    /// Integral doubles print without a fraction (`1` equals `1.0` in Firebase). Negative zero keeps
    /// its sign: the §6.8 hash distinguishes it, so a client must read back what the server hashes.
    static func formatDouble(_ d: Double) -> String {
        if d == 0 { return d.sign == .minus ? "-0.0" : "0" }
        if d == d.rounded(), abs(d) < 9.007199254740992e15 { return String(Int64(d)) }
        return d.description
    }

    static func writeString(_ s: String, into out: inout [UInt8]) {
        var s = s
        s.withUTF8 { writeString(utf8: $0, into: &out) }
    }

    /// A string given by its (valid) UTF-8, quoted and escaped as `writeString` does.
    static func writeString(utf8 buf: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        out.append(0x22)
        writeEscaped(utf8: buf, into: &out)
        out.append(0x22)
    }

    /// `s` escaped as inside `writeString`'s quotes. Byte by byte: pieces escaped one after the
    /// other are the whole escaped at once.
    static func writeEscaped(_ s: String, into out: inout [UInt8]) {
        var s = s
        s.withUTF8 { writeEscaped(utf8: $0, into: &out) }
    }

    static func writeEscaped(utf8 buf: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        // Runs without an escape are copied whole: byte-at-a-time appends were the largest
        // single cost of streaming an export.
        var start = 0
        for i in 0..<buf.count {
            let b = buf[i]
            guard b < 0x20 || b == 0x22 || b == 0x5C || b == 0x7F else { continue }
            if start < i { out.append(contentsOf: UnsafeBufferPointer(rebasing: buf[start..<i])) }
            switch b {
            case 0x22: out.append(contentsOf: [0x5C, 0x22])
            case 0x5C: out.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            default:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(b >> 4)], hex[Int(b & 15)]])
            }
            start = i + 1
        }
        if start < buf.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: buf[start...])) }
    }
}
