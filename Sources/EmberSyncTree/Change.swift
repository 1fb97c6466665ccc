import EmberCore

/// A change to a view's event cache, before it becomes an event (SDK `Change`).
struct Change {
    var type: EventType
    /// The new node (the old node for `childRemoved`).
    var node: Node
    var childKey: String?
    var oldNode: Node?
    var prevName: String?

    static func value(_ node: Node) -> Change { Change(type: .value, node: node) }
    static func childAdded(_ key: String, _ node: Node) -> Change { Change(type: .childAdded, node: node, childKey: key) }
    static func childRemoved(_ key: String, _ old: Node) -> Change { Change(type: .childRemoved, node: old, childKey: key) }
    static func childChanged(_ key: String, _ new: Node, old: Node) -> Change {
        Change(type: .childChanged, node: new, childKey: key, oldNode: old)
    }
    static func childMoved(_ key: String, _ node: Node) -> Change { Change(type: .childMoved, node: node, childKey: key) }
}

/// Collects child changes during one operation, folding repeated changes to one child.
struct ChildChangeAccumulator {
    private var order: [String] = []
    private var changes: KeyMap<Change> = [:]

    mutating func track(_ change: Change) {
        let key = change.childKey!
        guard let old = changes[key] else {
            changes[key] = change
            order.append(key)
            return
        }
        switch (change.type, old.type) {
        case (.childAdded, .childRemoved):
            changes[key] = .childChanged(key, change.node, old: old.node)
        case (.childRemoved, .childAdded):
            changes[key] = nil
            order.removeAll { $0.isExactly(key) }
        case (.childRemoved, .childChanged):
            changes[key] = .childRemoved(key, old.oldNode!)
        case (.childChanged, .childAdded):
            changes[key] = .childAdded(key, change.node)
        case (.childChanged, .childChanged):
            changes[key] = .childChanged(key, change.node, old: old.oldNode!)
        default:
            preconditionFailure("illegal combination of changes: \(change.type) after \(old.type)")
        }
    }

    var all: [Change] { order.map { changes[$0]! } }
}
