import EmberCore

/// A persistent tree keyed by path segments with an optional value at every node (SDK
/// `ImmutableTree`). Children iterate in plain string order, as the SDK's tree does.
struct ImmutableTree<Value> {
    var value: Value?
    var children: KeyMap<ImmutableTree<Value>>

    static var empty: ImmutableTree<Value> { ImmutableTree(value: nil, children: [:]) }

    init(value: Value? = nil, children: KeyMap<ImmutableTree<Value>> = [:]) {
        self.value = value
        self.children = children
    }

    var isEmpty: Bool { value == nil && children.isEmpty }

    /// Child keys in string (UTF-16 code unit) order.
    var sortedChildKeys: [String] {
        children.keys.sorted { KeyOrder.compareText($0, $1) < 0 }
    }

    /// The rootmost node on `path` that holds a value: its path (relative to this tree) and value.
    func findRootMostValueAndPath(_ path: Path) -> (path: Path, value: Value)? {
        var node = self
        var depth = 0
        while true {
            if let v = node.value { return (Path(validated: Array(path.segments.prefix(depth))), v) }
            guard depth < path.count, let next = node.children[path.segments[depth]] else { return nil }
            node = next
            depth += 1
        }
    }

    func subtree(_ path: Path) -> ImmutableTree<Value> {
        var node = self
        for key in path.segments {
            guard let next = node.children[key] else { return .empty }
            node = next
        }
        return node
    }

    func get(_ path: Path) -> Value? {
        subtree(path).value
    }

    func setting(_ path: Path, _ newValue: Value?) -> ImmutableTree<Value> {
        guard let front = path.first else {
            return ImmutableTree(value: newValue, children: children)
        }
        var copy = self
        let child = (children[front] ?? .empty).setting(path.dropFirst, newValue)
        copy.children[front] = child.isEmpty ? nil : child
        return copy
    }

    func removing(_ path: Path) -> ImmutableTree<Value> {
        guard let front = path.first else {
            return ImmutableTree(value: nil, children: children)
        }
        guard let child = children[front] else { return self }
        var copy = self
        let newChild = child.removing(path.dropFirst)
        copy.children[front] = newChild.isEmpty ? nil : newChild
        return copy
    }

    /// Replaces the whole subtree at `path`.
    func settingTree(_ path: Path, _ tree: ImmutableTree<Value>) -> ImmutableTree<Value> {
        guard let front = path.first else { return tree }
        var copy = self
        let child = (children[front] ?? .empty).settingTree(path.dropFirst, tree)
        copy.children[front] = child.isEmpty ? nil : child
        return copy
    }

    /// Post-order fold: children first (in key order), then this node.
    func fold<R>(_ f: (Path, Value?, [(String, R)]) -> R) -> R {
        fold(from: .root, f)
    }

    private func fold<R>(from pathSoFar: Path, _ f: (Path, Value?, [(String, R)]) -> R) -> R {
        var acc: [(String, R)] = []
        for key in sortedChildKeys {
            acc.append((key, children[key]!.fold(from: pathSoFar.child(key), f)))
        }
        return f(pathSoFar, value, acc)
    }

    /// Calls `f` on each value from the root down along `path` (including the node at `path`)
    /// until `f` returns non-nil.
    func findOnPath<R>(_ path: Path, _ f: (Path, Value) -> R?) -> R? {
        var node = self
        var depth = 0
        while true {
            let soFar = Path(validated: Array(path.segments.prefix(depth)))
            if let v = node.value, let r = f(soFar, v) { return r }
            guard depth < path.count, let next = node.children[path.segments[depth]] else { return nil }
            node = next
            depth += 1
        }
    }

    /// Calls `f` on each value strictly above `path` (the node at `path` itself is not visited).
    func foreachOnPath(_ path: Path, _ f: (Path, Value) -> Void) {
        var node = self
        for depth in 0..<path.count {
            if let v = node.value { f(Path(validated: Array(path.segments.prefix(depth))), v) }
            guard let next = node.children[path.segments[depth]] else { return }
            node = next
        }
    }

    /// Post-order visit of every value with its relative path.
    func foreach(_ f: (Path, Value) -> Void) {
        foreach(from: .root, f)
    }

    private func foreach(from pathSoFar: Path, _ f: (Path, Value) -> Void) {
        for key in sortedChildKeys {
            children[key]!.foreach(from: pathSoFar.child(key), f)
        }
        if let value { f(pathSoFar, value) }
    }
}

extension ImmutableTree where Value == Node {
    /// A tree of writes from (relative path, node) pairs, applied in order.
    init(writes: [(Path, Node)]) {
        var tree = ImmutableTree<Node>.empty
        for (path, node) in writes { tree = tree.setting(path, node) }
        self = tree
    }
}
extension ImmutableTree: Sendable where Value: Sendable {}
