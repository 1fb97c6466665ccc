/// Bounds that keep loading and evaluation cheap whatever the rules or data contain.
public struct RulesLimits: Sendable, Equatable {
    /// Longest expression string accepted, in UTF-8 bytes.
    public var maxExpressionLength: Int = 4096
    /// Deepest expression tree (nesting, operator and member chains), so the recursive parser,
    /// type checker and evaluator cannot exhaust the stack.
    public var maxExpressionDepth: Int = 128
    /// Longest regex literal pattern accepted by `matches`.
    public var maxRegexLength: Int = 256
    /// Steps (AST nodes visited) one expression evaluation may take before it fails (→ false).
    public var maxEvaluationSteps: Int = 10_000
    /// Steps across all expressions of one read/write decision before it is denied: a large
    /// write evaluates `.validate` once per changed node, so this bounds the whole decision.
    public var maxOperationSteps: Int = 10_000_000

    public init() {}

    public static let `default` = RulesLimits()
}
