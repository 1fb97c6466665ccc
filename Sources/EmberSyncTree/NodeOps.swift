import EmberCore

/// The pseudo-key that addresses a node's priority in sync-tree paths (`a/.priority`).
let priorityKey = ".priority"

/// A named child as an index sees it.
struct NamedNode: Equatable {
    var key: String
    var node: Node
}

// MARK: - Firebase child/priority access used by the sync tree

extension Node {
    /// The priority as a node: a leaf holding the priority value, or empty.
    var priorityNode: Node {
        switch priority {
        case nil: return .empty
        case .number(let d)?: return Node(.double(d))
        case .string(let s)?: return Node(.string(s))
        }
    }

    /// A priority read from a node written at `.priority` (a number or string leaf; anything else clears).
    static func priority(from node: Node) -> Priority? {
        switch node.leaf {
        case .string(let s)?: return .string(s)
        case .int(let i)?: return .number(Double(i))
        case .double(let d)?: return .number(d)
        default: return nil
        }
    }

    /// The child `key`, where `.priority` addresses the priority.
    func immediateChild(_ key: String) -> Node {
        key == priorityKey ? priorityNode : child(key)
    }

    /// The node at `path`, following `.priority` segments.
    func descendant(_ path: Path) -> Node {
        var node = self
        for key in path.segments {
            node = node.immediateChild(key)
            if node.isEmpty { return .empty }
        }
        return node
    }

    func hasChild(_ key: String) -> Bool { children[key] != nil }

    /// Sets the priority; an empty node cannot hold one.
    func updatingPriority(_ priorityNode: Node) -> Node {
        withPriority(Node.priority(from: priorityNode))
    }

    /// Replaces one child (`.priority` sets the priority). Writing under a leaf makes an object that
    /// keeps the leaf's priority; deleting under a leaf changes nothing.
    func updatingImmediateChild(_ key: String, _ newChild: Node) -> Node {
        if key == priorityKey { return updatingPriority(newChild) }
        return setting(newChild, at: Path(validated: [key]))
    }

    /// Replaces the node at `path` (a final `.priority` segment sets that node's priority).
    func updatingChild(_ path: Path, _ newChild: Node) -> Node {
        guard let front = path.first else { return newChild }
        if front == priorityKey { return updatingPriority(newChild) }
        if isLeaf && newChild.isEmpty { return self }
        let updated = immediateChild(front).updatingChild(path.dropFirst, newChild)
        return updatingImmediateChild(front, updated)
    }
}

// MARK: - Index-ordered access

extension QueryIndex {
    func compare(_ a: NamedNode, _ b: NamedNode) -> Int {
        compare((a.key, a.node), (b.key, b.node))
    }

    /// Whether the value this index orders by differs between two versions of a child (SDK
    /// `indexedValueChanged`: priority, child-at-path or whole value; never for the key index).
    func indexedValueChanged(_ old: Node, _ new: Node) -> Bool {
        switch self {
        case .priority: return old.priorityNode != new.priorityNode
        case .value: return old != new
        case .child(let p): return old.child(at: p) != new.child(at: p)
        case .key: return false
        }
    }
}

extension Node {
    /// Children in `index` order.
    func sortedChildren(by index: QueryIndex) -> [NamedNode] {
        QuerySpec(index: index).sortedChildren(of: self).map { NamedNode(key: $0.key, node: $0.node) }
    }

    /// The smallest child in `index` order (a linear scan).
    func firstChild(by index: QueryIndex) -> NamedNode? {
        extremeChild(by: index) { $0 < 0 }
    }

    /// The largest child in `index` order (a linear scan).
    func lastChild(by index: QueryIndex) -> NamedNode? {
        extremeChild(by: index) { $0 > 0 }
    }

    private func extremeChild(by index: QueryIndex, _ better: (Int) -> Bool) -> NamedNode? {
        var best: NamedNode? = nil
        for (k, v) in children {
            let candidate = NamedNode(key: k, node: v)
            if let b = best, !better(index.compare(candidate, b)) { continue }
            best = candidate
        }
        return best
    }

    /// The key of the child that precedes `key` in `index` order (nil when it is first or absent).
    func predecessorKey(of key: String, by index: QueryIndex) -> String? {
        guard let node = children[key] else { return nil }
        let target = NamedNode(key: key, node: node)
        var best: NamedNode? = nil
        for (k, v) in children where k != key {
            let candidate = NamedNode(key: k, node: v)
            guard index.compare(candidate, target) < 0 else { continue }
            if let b = best, index.compare(candidate, b) < 0 { continue }
            best = candidate
        }
        return best?.key
    }
}
