/// Recursive-descent parser for rule expressions with JavaScript precedence:
/// `?:` < `||` < `&&` < equality < relational < additive < multiplicative < unary < postfix.
struct Parser {
    private var lexer: Lexer
    private var tok: Token
    private var depth = 0
    private let limits: RulesLimits

    static func parse(_ text: String, limits: RulesLimits) throws(ExprSyntaxError) -> Expr {
        guard text.utf8.count <= limits.maxExpressionLength else {
            throw ExprSyntaxError(offset: 0, message: "expression is \(text.utf8.count) bytes long; the limit is \(limits.maxExpressionLength)")
        }
        var p = try Parser(text, limits: limits)
        let e = try p.ternary()
        guard case .end = p.tok.kind else { throw p.unexpected() }
        guard e.height <= limits.maxExpressionDepth else { throw tooDeep(limits, at: 0) }
        return e
    }

    private init(_ text: String, limits: RulesLimits) throws(ExprSyntaxError) {
        lexer = Lexer(text)
        tok = try lexer.next()
        self.limits = limits
    }

    private mutating func advance() throws(ExprSyntaxError) { tok = try lexer.next() }

    private func isPunct(_ p: String) -> Bool { tok.kind == .punct(p) }

    private mutating func expect(_ p: String) throws(ExprSyntaxError) {
        guard isPunct(p) else { throw unexpected(expecting: "'\(p)'") }
        try advance()
    }

    private func unexpected(expecting: String? = nil) -> ExprSyntaxError {
        let what: String
        switch tok.kind {
        case .end: what = "end of expression"
        case .number(let d): what = "number \(d)"
        case .string: what = "string"
        case .identifier(let s): what = "'\(s)'"
        case .punct(let p): what = "'\(p)'"
        case .regex: what = "regular expression"
        }
        let msg = expecting.map { "expected \($0) but found \(what)" } ?? "unexpected \(what)"
        return ExprSyntaxError(offset: tok.offset, message: msg)
    }

    private static func tooDeep(_ limits: RulesLimits, at offset: Int) -> ExprSyntaxError {
        ExprSyntaxError(offset: offset, message: "expression nested more than \(limits.maxExpressionDepth) levels deep")
    }

    /// Guards recursion so hostile nesting fails cleanly instead of overflowing the stack.
    private mutating func enter() throws(ExprSyntaxError) {
        depth += 1
        guard depth <= limits.maxExpressionDepth else { throw Parser.tooDeep(limits, at: tok.offset) }
    }

    /// Bounds trees that loops build (operator and member chains) as they grow.
    private func checked(_ e: Expr) throws(ExprSyntaxError) -> Expr {
        guard e.height <= limits.maxExpressionDepth else { throw Parser.tooDeep(limits, at: e.offset) }
        return e
    }

    private mutating func ternary() throws(ExprSyntaxError) -> Expr {
        try enter()
        defer { depth -= 1 }
        let cond = try binary(0)
        guard isPunct("?") else { return cond }
        try advance()
        let a = try ternary()
        try expect(":")
        let b = try ternary()
        return Expr(kind: .ternary(cond, a, b), offset: cond.offset)
    }

    private static let levels: [[BinaryOp]] = [
        [.or], [.and], [.eq, .ne, .seq, .sne], [.lt, .le, .gt, .ge], [.add, .sub], [.mul, .div, .mod],
    ]

    private mutating func binary(_ level: Int) throws(ExprSyntaxError) -> Expr {
        if level == Parser.levels.count { return try unary() }
        var lhs = try binary(level + 1)
        while case .punct(let p) = tok.kind, let op = BinaryOp(rawValue: p), Parser.levels[level].contains(op) {
            let at = tok.offset  // errors about the operation point at its operator
            try advance()
            try enter()
            let rhs = try binary(level + 1)
            depth -= 1
            lhs = try checked(Expr(kind: .binary(op, lhs, rhs), offset: at))
        }
        return lhs
    }

    private mutating func unary() throws(ExprSyntaxError) -> Expr {
        let start = tok.offset
        if isPunct("!") || isPunct("-") {
            let op: UnaryOp = isPunct("!") ? .not : .negate
            try advance()
            try enter()
            defer { depth -= 1 }
            let operand = try unary()
            return Expr(kind: .unary(op, operand), offset: start)
        }
        return try postfix()
    }

    private mutating func postfix() throws(ExprSyntaxError) -> Expr {
        var e = try primary()
        while true {
            if isPunct(".") {
                try advance()
                guard case .identifier(let name) = tok.kind else { throw unexpected(expecting: "a member name") }
                let at = tok.offset
                try advance()
                if isPunct("(") {
                    try advance()
                    let args = try arguments(method: name)
                    e = try checked(Expr(kind: .call(e, name, args), offset: at))
                } else {
                    e = try checked(Expr(kind: .member(e, name), offset: at))
                }
            } else if isPunct("[") {
                let at = tok.offset
                try advance()
                let key = try ternary()
                try expect("]")
                e = try checked(Expr(kind: .index(e, key), offset: at))
            } else if isPunct("(") {
                throw ExprSyntaxError(offset: tok.offset, message: "only methods can be called (receiver.method(...))")
            } else {
                return e
            }
        }
    }

    /// Arguments after `(`, through `)`. `matches` takes a regex literal, which only the parser
    /// can tell apart from division.
    private mutating func arguments(method: String) throws(ExprSyntaxError) -> [Expr] {
        var args: [Expr] = []
        if isPunct(")") { try advance(); return args }
        while true {
            if method == "matches", isPunct("/") {
                args.append(try regexLiteral())
            } else {
                args.append(try ternary())
            }
            if isPunct(",") { try advance(); continue }
            try expect(")")
            return args
        }
    }

    private mutating func regexLiteral() throws(ExprSyntaxError) -> Expr {
        let at = tok.offset
        let t = try lexer.regex(at: at)
        guard case .regex(let pattern, let flags) = t.kind else { throw unexpected() }
        guard pattern.utf8.count <= limits.maxRegexLength else {
            throw ExprSyntaxError(offset: at, message: "regular expression is \(pattern.utf8.count) bytes long; the limit is \(limits.maxRegexLength)")
        }
        guard !pattern.isEmpty else { throw ExprSyntaxError(offset: at, message: "empty regular expression") }
        guard flags.isEmpty || flags == "i" else {
            throw ExprSyntaxError(offset: at, message: "unsupported regular expression flags '\(flags)' (only 'i')")
        }
        var regex: Regex<AnyRegexOutput>
        do { regex = try Regex(pattern) } catch {
            throw ExprSyntaxError(offset: at, message: "invalid regular expression /\(pattern)/")
        }
        // Code-point semantics as in JavaScript (Swift's default is grapheme clusters).
        regex = regex.matchingSemantics(.unicodeScalar)
        if flags == "i" { regex = regex.ignoresCase() }
        try advance()
        return Expr(kind: .regex(CompiledRegex(source: "/\(pattern)/\(flags)", regex: regex)), offset: at)
    }

    private mutating func primary() throws(ExprSyntaxError) -> Expr {
        let at = tok.offset
        switch tok.kind {
        case .number(let d):
            try advance()
            return Expr(kind: .number(d), offset: at)
        case .string(let s):
            try advance()
            return Expr(kind: .string(s), offset: at)
        case .identifier(let name):
            try advance()
            switch name {
            case "true": return Expr(kind: .bool(true), offset: at)
            case "false": return Expr(kind: .bool(false), offset: at)
            case "null": return Expr(kind: .null, offset: at)
            default: return Expr(kind: .variable(name), offset: at)
            }
        case .punct("("):
            try advance()
            let e = try ternary()
            try expect(")")
            return e
        case .punct("["):
            try advance()
            var items: [Expr] = []
            if isPunct("]") { try advance(); return Expr(kind: .array(items), offset: at) }
            while true {
                items.append(try ternary())
                if isPunct(",") { try advance(); continue }
                try expect("]")
                return Expr(kind: .array(items), offset: at)
            }
        default:
            throw unexpected()
        }
    }
}
