import EmberCore

/// The data a rule decision may look at, read on demand: storage implements it over a
/// transaction so that `root.child('big').exists()` costs one seek, not a subtree read. Only
/// `val()` and `.validate` walks below a write materialise subtrees (`node(at:)`).
/// Paths are absolute. Implementations that can fail record the failure themselves (the
/// evaluator treats missing data as absent) and the caller rethrows it after the decision.
public protocol RulesDataSource {
    /// The whole subtree at `path` (empty when absent).
    func node(at path: Path) -> Node
    /// The leaf value (nil for an object or absent) and priority at `path`, without children.
    func shallow(at path: Path) -> (leaf: Leaf?, priority: Priority?)
    /// Whether anything is stored at or below `path`.
    func exists(at path: Path) -> Bool
    /// Whether the node at `path` is an object with at least one child.
    func hasChildren(at path: Path) -> Bool
}

/// A data source over an in-memory tree (tests, fuzzing, callers that already hold the data).
public struct NodeDataSource: RulesDataSource {
    public let root: Node

    public init(_ root: Node) { self.root = root }

    public func node(at path: Path) -> Node { root.child(at: path) }
    public func shallow(at path: Path) -> (leaf: Leaf?, priority: Priority?) {
        let n = root.child(at: path)
        return (n.leaf, n.priority)
    }
    public func exists(at path: Path) -> Bool { !root.child(at: path).isEmpty }
    public func hasChildren(at path: Path) -> Bool { root.child(at: path).hasChildren }
}

/// `newData`: the stored data with a write's parts (absolute, non-overlapping) laid over it,
/// computed per question so that nothing outside the parts is read unless a rule asks.
struct OverlayDataSource: RulesDataSource {
    let base: any RulesDataSource
    let writes: [(Path, Node)]

    /// The written node covering `path` (a part at or above it), if any.
    private func covering(_ path: Path) -> Node? {
        for (w, n) in writes where w.contains(path) { return n.child(at: w.relative(path)!) }
        return nil
    }

    private func below(_ path: Path) -> [(Path, Node)] {
        writes.filter { path.contains($0.0) && $0.0 != path }
    }

    func node(at path: Path) -> Node {
        if let n = covering(path) { return n }
        var n = base.node(at: path)
        for (w, wn) in below(path) { n.set(wn, at: path.relative(w)!) }
        return n
    }

    func shallow(at path: Path) -> (leaf: Leaf?, priority: Priority?) {
        if let n = covering(path) { return (n.leaf, n.priority) }
        let parts = below(path)
        if parts.isEmpty { return base.shallow(at: path) }
        // A non-empty part below makes this an object that keeps its priority (`Node.set`).
        if parts.contains(where: { !$0.1.isEmpty }) { return (nil, base.shallow(at: path).priority) }
        let n = node(at: path)
        return (n.leaf, n.priority)
    }

    func exists(at path: Path) -> Bool {
        if let n = covering(path) { return !n.isEmpty }
        let parts = below(path)
        if parts.isEmpty { return base.exists(at: path) }
        if parts.contains(where: { !$0.1.isEmpty }) { return true }
        return !node(at: path).isEmpty  // only deletions below: they may empty it
    }

    func hasChildren(at path: Path) -> Bool {
        if let n = covering(path) { return n.hasChildren }
        let parts = below(path)
        if parts.isEmpty { return base.hasChildren(at: path) }
        if parts.contains(where: { !$0.1.isEmpty }) { return true }
        return node(at: path).hasChildren
    }
}
