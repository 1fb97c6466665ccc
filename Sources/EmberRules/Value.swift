import EmberCore

/// A snapshot in a rule: a location in one version of the tree (before or after the write).
/// Moving with `parent()` and `child()` reads nothing; the methods read only what they answer.
struct Snapshot {
    let source: any RulesDataSource
    let path: Path

    var node: Node { source.node(at: path) }
}

/// Run-time values of rule expressions.
enum Value {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case snapshot(Snapshot)
    /// An object or array from JSON: `auth`, `query` and their members.
    case compound(JSON)
    /// `val()` of a non-leaf, kept as the node: converting a large subtree to JSON on every
    /// `data.val()` would cost time proportional to the data, not to the rule.
    case tree(Node)

    init(json: JSON) {
        switch json {
        case .null: self = .null
        case .bool(let b): self = .bool(b)
        case .int(let i): self = .number(Double(i))
        case .double(let d): self = .number(d)
        case .string(let s): self = .string(s)
        case .array, .object: self = .compound(json)
        }
    }

    init(node: Node) {
        switch node.leaf {
        case .bool(let b)?: self = .bool(b)
        case .int(let i)?: self = .number(Double(i))
        case .double(let d)?: self = .number(d)
        case .string(let s)?: self = .string(s)
        case nil: self = node.isEmpty ? .null : .tree(node)
        }
    }

    /// `===`: same type and value. Snapshots never compare (the type checker refuses it).
    func strictlyEquals(_ other: Value) -> Bool {
        switch (self, other) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.number(a), .number(b)): return a == b
        case let (.string(a), .string(b)): return a.utf8.elementsEqual(b.utf8)
        case let (.compound(a), .compound(b)): return a == b
        case let (.tree(a), .tree(b)): return a.toJSON() == b.toJSON()
        default: return false
        }
    }

    /// JavaScript's ToString for `+` concatenation.
    var concatenationText: String? {
        switch self {
        case .string(let s): return s
        case .number(let d):
            if d.isNaN { return "NaN" }
            if d.isInfinite { return d < 0 ? "-Infinity" : "Infinity" }
            if d == d.rounded(), abs(d) < 1e21 { return String(Int64(d)) }
            return String(d)
        case .bool(let b): return b ? "true" : "false"
        case .null: return "null"
        default: return nil
        }
    }
}
