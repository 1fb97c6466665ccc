import EmberCore

/// JSON as a rules document is written: members keep their order and the line they start on, so
/// errors can name the line. `//` and `/* */` comments count as whitespace (firebase-tools uploads
/// `database.rules.json` with comments). EmberCore's JSON parser has neither feature, and rules
/// documents are small, so this separate parser stays simple.
indirect enum RulesJSON: Sendable {
    case null(line: Int)
    case bool(Bool, line: Int)
    case number(Double, line: Int)
    case string(String, line: Int)
    case array([RulesJSON], line: Int)
    case object([(key: String, keyLine: Int, value: RulesJSON)], line: Int)

    var line: Int {
        switch self {
        case .null(let l), .bool(_, let l), .number(_, let l), .string(_, let l), .array(_, let l), .object(_, let l):
            return l
        }
    }

    var kindName: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }

    static func parse(_ text: String, maxDepth: Int = 64) throws(RulesError) -> RulesJSON {
        var p = RulesJSONParser(bytes: Array(text.utf8), maxDepth: maxDepth)
        try p.skipSpace()
        let value = try p.value(depth: 0)
        try p.skipSpace()
        guard p.i == p.b.count else { throw p.fail("unexpected text after the rules document") }
        return value
    }
}

private struct RulesJSONParser {
    let b: [UInt8]
    let maxDepth: Int
    var i = 0
    var line = 1

    init(bytes: [UInt8], maxDepth: Int) {
        self.b = bytes
        self.maxDepth = maxDepth
    }

    func fail(_ reason: String) -> RulesError {
        RulesError(line: line, reason: "rules do not parse: \(reason)")
    }

    mutating func skipSpace() throws(RulesError) {
        while i < b.count {
            switch b[i] {
            case 0x0A: line += 1; i += 1
            case 0x20, 0x09, 0x0D: i += 1
            case UInt8(ascii: "/") where i + 1 < b.count && b[i + 1] == UInt8(ascii: "/"):
                while i < b.count && b[i] != 0x0A { i += 1 }
            case UInt8(ascii: "/") where i + 1 < b.count && b[i + 1] == UInt8(ascii: "*"):
                i += 2
                while i < b.count && !(b[i] == UInt8(ascii: "*") && i + 1 < b.count && b[i + 1] == UInt8(ascii: "/")) {
                    if b[i] == 0x0A { line += 1 }
                    i += 1
                }
                guard i < b.count else { throw fail("unterminated /* comment") }
                i += 2
            default: return
            }
        }
    }

    mutating func value(depth: Int) throws(RulesError) -> RulesJSON {
        guard depth <= maxDepth else { throw fail("nested too deeply") }
        guard i < b.count else { throw fail("unexpected end of text") }
        let start = line
        switch b[i] {
        case UInt8(ascii: "{"):
            i += 1
            var members: [(key: String, keyLine: Int, value: RulesJSON)] = []
            try skipSpace()
            if i < b.count && b[i] == UInt8(ascii: "}") { i += 1; return .object(members, line: start) }
            while true {
                try skipSpace()
                guard i < b.count, b[i] == UInt8(ascii: "\"") else { throw fail("expected a quoted key") }
                let keyLine = line
                let key = try string()
                guard !members.contains(where: { $0.key.isExactly(key) }) else { throw fail("duplicate key \"\(key)\"") }
                try skipSpace()
                guard i < b.count, b[i] == UInt8(ascii: ":") else { throw fail("expected ':' after \"\(key)\"") }
                i += 1
                try skipSpace()
                members.append((key, keyLine, try value(depth: depth + 1)))
                try skipSpace()
                guard i < b.count else { throw fail("unterminated object") }
                if b[i] == UInt8(ascii: ",") { i += 1; continue }
                if b[i] == UInt8(ascii: "}") { i += 1; return .object(members, line: start) }
                throw fail("expected ',' or '}' in object")
            }
        case UInt8(ascii: "["):
            i += 1
            var items: [RulesJSON] = []
            try skipSpace()
            if i < b.count && b[i] == UInt8(ascii: "]") { i += 1; return .array(items, line: start) }
            while true {
                try skipSpace()
                items.append(try value(depth: depth + 1))
                try skipSpace()
                guard i < b.count else { throw fail("unterminated array") }
                if b[i] == UInt8(ascii: ",") { i += 1; continue }
                if b[i] == UInt8(ascii: "]") { i += 1; return .array(items, line: start) }
                throw fail("expected ',' or ']' in array")
            }
        case UInt8(ascii: "\""):
            return .string(try string(), line: start)
        case UInt8(ascii: "t"): try word("true"); return .bool(true, line: start)
        case UInt8(ascii: "f"): try word("false"); return .bool(false, line: start)
        case UInt8(ascii: "n"): try word("null"); return .null(line: start)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            let s = i
            i += 1
            while i < b.count, "0123456789.eE+-".utf8.contains(b[i]) { i += 1 }
            guard let d = Double(String(decoding: b[s..<i], as: UTF8.self)) else { throw fail("bad number") }
            return .number(d, line: start)
        default:
            throw fail("unexpected character '\(String(decoding: [b[i]], as: UTF8.self))'")
        }
    }

    mutating func word(_ w: String) throws(RulesError) {
        let u = Array(w.utf8)
        guard i + u.count <= b.count, Array(b[i..<i + u.count]) == u else { throw fail("unexpected word (expected \(w))") }
        i += u.count
    }

    /// A JSON string; raw newlines are not allowed, so the line stays that of the opening quote.
    mutating func string() throws(RulesError) -> String {
        i += 1
        var out: [UInt8] = []
        while i < b.count {
            let c = b[i]
            switch c {
            case UInt8(ascii: "\""):
                i += 1
                return String(decoding: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard i + 1 < b.count else { throw fail("unterminated string") }
                let e = b[i + 1]
                i += 2
                if let simple = JSONEscape.simple(e) { out.append(simple); continue }
                switch e {
                case UInt8(ascii: "u"):
                    guard i + 4 <= b.count, let v = UInt32(String(decoding: b[i..<i + 4], as: UTF8.self), radix: 16) else {
                        throw fail("bad \\u escape")
                    }
                    i += 4
                    // Rules text is ASCII in practice; an unpaired surrogate becomes U+FFFD.
                    let scalar = Unicode.Scalar(v) ?? "\u{FFFD}"
                    out.append(contentsOf: Array(String(Character(scalar)).utf8))
                default: throw fail("bad escape in string")
                }
            case 0x00...0x08, 0x0A...0x1F:
                // Raw tabs are tolerated (hand-edited rules files have them); line breaks are not.
                throw fail("control character or line break inside a string")
            default:
                out.append(c)
                i += 1
            }
        }
        throw fail("unterminated string")
    }
}
