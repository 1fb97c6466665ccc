/// Tokens of the rules expression language (a JavaScript subset). The lexer is pulled one token
/// at a time by the parser, because `/` is division everywhere except as the argument of
/// `matches(...)`, where the parser asks for a regex literal instead (`regex(at:)`).
enum TokenKind: Equatable, Sendable {
    case number(Double)
    case string(String)
    case identifier(String)   // includes `$captures`, `true`, `false`, `null`
    case punct(String)        // operators and brackets
    case regex(pattern: String, flags: String)
    case end
}

struct Token: Sendable {
    let kind: TokenKind
    /// Byte offset in the expression, for error messages (1-based column = offset + 1).
    let offset: Int
}

struct ExprSyntaxError: Error {
    let offset: Int
    let message: String
}

struct Lexer {
    let b: [UInt8]
    var i = 0

    init(_ text: String) { b = Array(text.utf8) }

    private static let puncts: [String] = [
        "===", "!==", "==", "!=", "<=", ">=", "&&", "||",
        "<", ">", "+", "-", "*", "/", "%", "!", "?", ":", ".", ",", "(", ")", "[", "]",
    ]

    mutating func next() throws(ExprSyntaxError) -> Token {
        while i < b.count, b[i] == 0x20 || b[i] == 0x09 || b[i] == 0x0A || b[i] == 0x0D { i += 1 }
        let start = i
        guard i < b.count else { return Token(kind: .end, offset: start) }
        let c = b[i]
        if Lexer.isIdentStart(c) {
            while i < b.count, Lexer.isIdentPart(b[i]) { i += 1 }
            return Token(kind: .identifier(String(decoding: b[start..<i], as: UTF8.self)), offset: start)
        }
        if Lexer.isDigit(c) || (c == UInt8(ascii: ".") && i + 1 < b.count && Lexer.isDigit(b[i + 1])) {
            return try number(start)
        }
        if c == UInt8(ascii: "'") || c == UInt8(ascii: "\"") { return try string(quote: c, start) }
        for p in Lexer.puncts {
            let u = Array(p.utf8)
            if i + u.count <= b.count, Array(b[i..<i + u.count]) == u {
                i += u.count
                return Token(kind: .punct(p), offset: start)
            }
        }
        throw ExprSyntaxError(offset: start, message: "unexpected character '\(String(decoding: [c], as: UTF8.self))'")
    }

    /// Re-lexes from `offset` (where a `/` was read) as a regex literal `/pattern/flags`.
    mutating func regex(at offset: Int) throws(ExprSyntaxError) -> Token {
        i = offset + 1
        var pattern: [UInt8] = []
        var inClass = false
        while i < b.count {
            let c = b[i]
            if c == UInt8(ascii: "\\"), i + 1 < b.count {
                pattern.append(c); pattern.append(b[i + 1]); i += 2; continue
            }
            if c == UInt8(ascii: "[") { inClass = true }
            if c == UInt8(ascii: "]") { inClass = false }
            if c == UInt8(ascii: "/") && !inClass { break }
            pattern.append(c)
            i += 1
        }
        guard i < b.count else { throw ExprSyntaxError(offset: offset, message: "unterminated regular expression") }
        i += 1
        let fs = i
        while i < b.count, Lexer.isIdentPart(b[i]) { i += 1 }
        return Token(kind: .regex(pattern: String(decoding: pattern, as: UTF8.self),
                                  flags: String(decoding: b[fs..<i], as: UTF8.self)), offset: offset)
    }

    private mutating func number(_ start: Int) throws(ExprSyntaxError) -> Token {
        while i < b.count, Lexer.isDigit(b[i]) || b[i] == UInt8(ascii: ".") { i += 1 }
        if i < b.count, b[i] == UInt8(ascii: "e") || b[i] == UInt8(ascii: "E") {
            i += 1
            if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") { i += 1 }
            while i < b.count, Lexer.isDigit(b[i]) { i += 1 }
        }
        let text = String(decoding: b[start..<i], as: UTF8.self)
        guard let d = Double(text), i >= b.count || !Lexer.isIdentStart(b[i]) else {
            throw ExprSyntaxError(offset: start, message: "bad number '\(text)'")
        }
        return Token(kind: .number(d), offset: start)
    }

    private mutating func string(quote: UInt8, _ start: Int) throws(ExprSyntaxError) -> Token {
        i += 1
        var out: [UInt8] = []
        while i < b.count {
            let c = b[i]
            if c == quote { i += 1; return Token(kind: .string(String(decoding: out, as: UTF8.self)), offset: start) }
            if c == UInt8(ascii: "\\") {
                guard i + 1 < b.count else { break }
                let e = b[i + 1]
                i += 2
                switch e {
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "0"): out.append(0x00)
                case UInt8(ascii: "u"):
                    guard i + 4 <= b.count, let v = UInt32(String(decoding: b[i..<i + 4], as: UTF8.self), radix: 16),
                          let s = Unicode.Scalar(v) else {
                        throw ExprSyntaxError(offset: i - 2, message: "bad \\u escape")
                    }
                    i += 4
                    out.append(contentsOf: Array(String(Character(s)).utf8))
                default: out.append(e)  // \' \" \\ \/ and JS's identity escapes
                }
                continue
            }
            out.append(c)
            i += 1
        }
        throw ExprSyntaxError(offset: start, message: "unterminated string")
    }

    static func isDigit(_ c: UInt8) -> Bool { c >= 48 && c <= 57 }
    static func isIdentStart(_ c: UInt8) -> Bool {
        (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c == UInt8(ascii: "_") || c == UInt8(ascii: "$")
    }
    static func isIdentPart(_ c: UInt8) -> Bool { isIdentStart(c) || isDigit(c) }
}
