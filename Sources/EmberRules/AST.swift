/// Expression syntax tree. Every node keeps its byte offset in the expression for error messages.
struct Expr: Sendable {
    let kind: ExprKind
    let offset: Int
}

indirect enum ExprKind: Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    /// Only ever the argument of `matches`; compiled once at load time.
    case regex(CompiledRegex)
    /// Only ever the argument of `hasChildren`.
    case array([Expr])
    case variable(String)
    case member(Expr, String)
    case index(Expr, Expr)
    /// `receiver.name(args)`: the language has methods only, no free functions.
    case call(Expr, String, [Expr])
    case unary(UnaryOp, Expr)
    case binary(BinaryOp, Expr, Expr)
    case ternary(Expr, Expr, Expr)
}

enum UnaryOp: String, Sendable { case not = "!", negate = "-" }

enum BinaryOp: String, Sendable {
    case add = "+", sub = "-", mul = "*", div = "/", mod = "%"
    case eq = "==", ne = "!=", seq = "===", sne = "!=="
    case lt = "<", le = "<=", gt = ">", ge = ">="
    case and = "&&", or = "||"
}

/// A regex literal compiled at load time. Swift `Regex` is immutable and safe to share.
struct CompiledRegex: @unchecked Sendable {
    let source: String
    let regex: Regex<AnyRegexOutput>

    func matches(_ s: String) -> Bool { s.firstMatch(of: regex) != nil }
}
