import EmberCore

/// Applies a query's filter to a view's cache while reporting child changes (SDK `NodeFilter`).
protocol NodeFilter {
    var index: QueryIndex { get }
    /// Whether the filter drops children (range or limit).
    var filtersNodes: Bool { get }
    var indexedFilter: IndexedFilter { get }

    func updateChild(_ snap: Node, _ key: String, _ newChild: Node, _ affectedPath: Path,
                     _ source: CompleteChildSource, _ acc: inout ChildChangeAccumulator?) -> Node
    func updateFullNode(_ oldSnap: Node, _ newSnap: Node, _ acc: inout ChildChangeAccumulator?) -> Node
    func updatePriority(_ oldSnap: Node, _ newPriority: Node) -> Node
}

func makeFilter(for spec: QuerySpec) -> NodeFilter {
    if spec.limit != nil { return LimitedFilter(spec: spec) }
    if spec.hasRange { return RangedFilter(spec: spec) }
    return IndexedFilter(index: spec.index)
}

/// No filtering: tracks child changes only.
struct IndexedFilter: NodeFilter {
    let index: QueryIndex
    var filtersNodes: Bool { false }
    var indexedFilter: IndexedFilter { self }

    func updateChild(_ snap: Node, _ key: String, _ newChild: Node, _ affectedPath: Path,
                     _ source: CompleteChildSource, _ acc: inout ChildChangeAccumulator?) -> Node {
        let oldChild = snap.immediateChild(key)
        if oldChild.descendant(affectedPath) == newChild.descendant(affectedPath) {
            // A child can enter or leave while `affectedPath` is null in both versions.
            if oldChild.isEmpty == newChild.isEmpty { return snap }
        }
        if acc != nil {
            if newChild.isEmpty {
                if snap.hasChild(key) { acc!.track(.childRemoved(key, oldChild)) }
            } else if oldChild.isEmpty {
                acc!.track(.childAdded(key, newChild))
            } else {
                acc!.track(.childChanged(key, newChild, old: oldChild))
            }
        }
        if snap.isLeaf && newChild.isEmpty { return snap }
        return snap.updatingImmediateChild(key, newChild)
    }

    func updateFullNode(_ oldSnap: Node, _ newSnap: Node, _ acc: inout ChildChangeAccumulator?) -> Node {
        if acc != nil {
            if !oldSnap.isLeaf {
                for named in oldSnap.sortedChildren(by: .priority) where !newSnap.hasChild(named.key) {
                    acc!.track(.childRemoved(named.key, named.node))
                }
            }
            if !newSnap.isLeaf {
                for named in newSnap.sortedChildren(by: .priority) {
                    if let old = oldSnap.children[named.key] {
                        if old != named.node { acc!.track(.childChanged(named.key, named.node, old: old)) }
                    } else {
                        acc!.track(.childAdded(named.key, named.node))
                    }
                }
            }
        }
        return newSnap
    }

    func updatePriority(_ oldSnap: Node, _ newPriority: Node) -> Node {
        oldSnap.isEmpty ? .empty : oldSnap.updatingPriority(newPriority)
    }
}

/// A range (startAt/endAt/equalTo/startAfter/endBefore) without a limit.
struct RangedFilter: NodeFilter {
    let spec: QuerySpec
    var index: QueryIndex { spec.index }
    var filtersNodes: Bool { true }
    var indexedFilter: IndexedFilter { IndexedFilter(index: spec.index) }

    func matches(_ child: NamedNode) -> Bool { spec.inRange(key: child.key, node: child.node) }

    func updateChild(_ snap: Node, _ key: String, _ newChild: Node, _ affectedPath: Path,
                     _ source: CompleteChildSource, _ acc: inout ChildChangeAccumulator?) -> Node {
        let child = matches(NamedNode(key: key, node: newChild)) ? newChild : .empty
        return indexedFilter.updateChild(snap, key, child, affectedPath, source, &acc)
    }

    func updateFullNode(_ oldSnap: Node, _ newSnap: Node, _ acc: inout ChildChangeAccumulator?) -> Node {
        indexedFilter.updateFullNode(oldSnap, spec.apply(to: newSnap), &acc)
    }

    /// Queries do not carry priorities at their root.
    func updatePriority(_ oldSnap: Node, _ newPriority: Node) -> Node { oldSnap }
}

/// A limit window (with an optional range) that refills from complete data when children leave.
struct LimitedFilter: NodeFilter {
    let spec: QuerySpec
    let ranged: RangedFilter
    let limit: Int
    let reverse: Bool

    init(spec: QuerySpec) {
        self.spec = spec
        self.ranged = RangedFilter(spec: spec)
        self.limit = spec.limit ?? 0
        self.reverse = !spec.limitFromStart
    }

    var index: QueryIndex { spec.index }
    var filtersNodes: Bool { true }
    var indexedFilter: IndexedFilter { IndexedFilter(index: spec.index) }

    func updateChild(_ snap: Node, _ key: String, _ newChild: Node, _ affectedPath: Path,
                     _ source: CompleteChildSource, _ acc: inout ChildChangeAccumulator?) -> Node {
        let child = ranged.matches(NamedNode(key: key, node: newChild)) ? newChild : .empty
        if snap.immediateChild(key) == child { return snap }
        if snap.childCount < limit {
            return indexedFilter.updateChild(snap, key, child, affectedPath, source, &acc)
        }
        return fullLimitUpdateChild(snap, key, child, source, &acc)
    }

    func updateFullNode(_ oldSnap: Node, _ newSnap: Node, _ acc: inout ChildChangeAccumulator?) -> Node {
        indexedFilter.updateFullNode(oldSnap, spec.apply(to: newSnap), &acc)
    }

    func updatePriority(_ oldSnap: Node, _ newPriority: Node) -> Node { oldSnap }

    /// Window order comparison: the window's far end is "greater".
    private func cmp(_ a: NamedNode, _ b: NamedNode) -> Int {
        reverse ? index.compare(b, a) : index.compare(a, b)
    }

    private func fullLimitUpdateChild(_ snap: Node, _ key: String, _ childSnap: Node,
                                      _ source: CompleteChildSource, _ acc: inout ChildChangeAccumulator?) -> Node {
        let newNamed = NamedNode(key: key, node: childSnap)
        guard let windowBoundary = reverse ? snap.firstChild(by: index) : snap.lastChild(by: index) else { return snap }
        let inRange = ranged.matches(newNamed)
        if let oldChild = snap.children[key] {
            var next = source.childAfterChild(index, windowBoundary, reverse: reverse)
            while let n = next, n.key.isExactly(key) || snap.hasChild(n.key) {
                // Children updated by the same merge but not yet applied here are skipped.
                next = source.childAfterChild(index, n, reverse: reverse)
            }
            let compareNext = next.map { cmp($0, newNamed) } ?? 1
            let remainsInWindow = inRange && !childSnap.isEmpty && compareNext >= 0
            if remainsInWindow {
                acc?.track(.childChanged(key, childSnap, old: oldChild))
                return snap.updatingImmediateChild(key, childSnap)
            }
            acc?.track(.childRemoved(key, oldChild))
            let without = snap.updatingImmediateChild(key, .empty)
            if let next, ranged.matches(next) {
                acc?.track(.childAdded(next.key, next.node))
                return without.updatingImmediateChild(next.key, next.node)
            }
            return without
        }
        if childSnap.isEmpty { return snap }
        if inRange && cmp(windowBoundary, newNamed) >= 0 {
            acc?.track(.childRemoved(windowBoundary.key, windowBoundary.node))
            acc?.track(.childAdded(key, childSnap))
            return snap.updatingImmediateChild(key, childSnap).updatingImmediateChild(windowBoundary.key, .empty)
        }
        return snap
    }
}
