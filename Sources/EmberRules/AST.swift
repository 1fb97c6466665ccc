import Synchronization

/// Expression syntax tree. Every node keeps its byte offset in the expression for error messages.
struct Expr: Sendable {
    let kind: ExprKind
    let offset: Int
    /// Levels of the tree rooted here. The type checker and evaluator recurse over the tree, so
    /// the parser bounds this (a long `a+b+c+…` chain is built by a loop but is still deep).
    let height: Int

    init(kind: ExprKind, offset: Int) {
        self.kind = kind
        self.offset = offset
        let below: Int
        switch kind {
        case .null, .bool, .number, .string, .regex, .variable: below = 0
        case .array(let items): below = items.map(\.height).max() ?? 0
        case .member(let e, _), .unary(_, let e): below = e.height
        case .index(let a, let b), .binary(_, let a, let b): below = max(a.height, b.height)
        case .call(let r, _, let args): below = max(r.height, args.map(\.height).max() ?? 0)
        case .ternary(let a, let b, let c): below = max(a.height, b.height, c.height)
        }
        height = below + 1
    }
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

/// A regex literal compiled at load time. Swift's `Regex` is not `Sendable` (it lowers its
/// program lazily), so the shared compiled rules reach it through a lock.
final class CompiledRegex: Sendable {
    let source: String
    private let regex: Mutex<Regex<AnyRegexOutput>>

    init(source: String, regex: consuming sending Regex<AnyRegexOutput>) {
        self.source = source
        self.regex = Mutex(regex)
    }

    func matches(_ s: String) -> Bool {
        regex.withLock { s.firstMatch(of: $0) != nil }
    }
}
