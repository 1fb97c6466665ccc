import EmberCore

/// One compiled condition: a constant (boolean rule) or a type-checked expression.
enum Condition: Sendable {
    case constant(Bool)
    case expression(Expr, source: String)
}

/// The rules at one location pattern. Literal children take precedence over the single
/// `$wildcard` child, which matches every other key and binds it to its name.
final class RuleNode: Sendable {
    let read: Condition?
    let write: Condition?
    let validate: Condition?
    let indexOn: [String]
    let children: KeyMap<RuleNode>
    let wildcard: (name: String, node: RuleNode)?
    /// Whether a `.validate` exists here or below: writes under rules without any skip the
    /// validation walk over their (possibly large) new data.
    let containsValidate: Bool

    init(read: Condition?, write: Condition?, validate: Condition?, indexOn: [String],
         children: KeyMap<RuleNode>, wildcard: (name: String, node: RuleNode)?) {
        self.read = read
        self.write = write
        self.validate = validate
        self.indexOn = indexOn
        self.children = children
        self.wildcard = wildcard
        containsValidate = validate != nil || children.values.contains { $0.containsValidate }
            || wildcard?.node.containsValidate == true
    }

    static let empty = RuleNode(read: nil, write: nil, validate: nil, indexOn: [], children: [:], wildcard: nil)

    /// The rules for child `key`, with the capture it binds (if matched by the wildcard).
    func child(_ key: String) -> (node: RuleNode, capture: (String, String)?)? {
        if let lit = children[key] { return (lit, nil) }
        if let w = wildcard { return (w.node, (w.name, key)) }
        return nil
    }

    /// `.indexOn` definitions below (and at) this node, as `(pattern, indexes)`.
    func indexDefinitions(prefix: [String]) -> [(pattern: [String], indexes: [String])] {
        var out: [(pattern: [String], indexes: [String])] = []
        if !indexOn.isEmpty { out.append((prefix, indexOn)) }
        for key in children.keys.sorted() { out += children[key]!.indexDefinitions(prefix: prefix + [key]) }
        if let w = wildcard { out += w.node.indexDefinitions(prefix: prefix + [w.name]) }
        return out
    }
}
