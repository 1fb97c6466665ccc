import EmberCore

/// Subscriptions by location: a trie keyed by path segment, one entry per subscription at the
/// node of its path. Matching a change walks from the root to the changed path and then only
/// into the parts of the subtree the change touches, so its cost grows with the depth of the
/// change and the subscriptions it concerns, not with every subscription of the namespace.
/// Empty nodes are pruned on removal, so every node visited below a change holds or leads to
/// at least one subscription. Shared by the SSE (`StreamHub`) and WebSocket (`RealtimeHub`)
/// fronts; not thread-safe (each hub keeps it under its lock).
struct PathIndex<Key: Hashable, Value> {
    private struct Node {
        var here: [Key: Value] = [:]
        var children: KeyMap<Node> = [:]
        var isEmpty: Bool { here.isEmpty && children.isEmpty }
    }

    private var root = Node()
    /// Subscriptions in the index.
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// Adds (or replaces) the subscription `key` at `path`.
    mutating func insert(_ value: Value, for key: Key, at path: Path) {
        if Self.insert(value, for: key, into: &root, path.segments[...]) { count += 1 }
    }

    /// Removes the subscription `key` at `path`; returns its value (nil when there was none).
    @discardableResult
    mutating func remove(_ key: Key, at path: Path) -> Value? {
        let removed = Self.remove(key, from: &root, path.segments[...])
        if removed != nil { count -= 1 }
        return removed
    }

    /// The subscription `key` at `path`, if any.
    func value(for key: Key, at path: Path) -> Value? {
        var node = root
        for seg in path.segments {
            guard let next = node.children[seg] else { return nil }
            node = next
        }
        return node.here[key]
    }

    /// Every subscription, grouped by path (for revocation and resync, which visit all). Each
    /// group is the node's own dictionary, shared copy-on-write: handing out a location's
    /// 10,000 subscriptions copies none of them.
    func all() -> [(path: Path, values: [Key: Value])] {
        var out: [(path: Path, values: [Key: Value])] = []
        var segs: [String] = []
        Self.collectSubtree(root, &segs, into: &out)
        return out
    }

    /// The subscriptions a change concerns, grouped by their path: those at `base` and above it,
    /// and below it those at or under one of `parts` (paths relative to `base`; nil means the
    /// whole subtree, as for a set at `base`). These are exactly the locations for which
    /// `ChangeRouting.events` is not empty.
    func matching(base: Path, parts: [Path]?) -> [(path: Path, values: [Key: Value])] {
        var out: [(path: Path, values: [Key: Value])] = []
        var node = root
        var segs: [String] = []
        segs.reserveCapacity(base.count + 4)
        for seg in base.segments {
            if !node.here.isEmpty { out.append((Path(validated: segs), node.here)) }
            guard let next = node.children[seg] else { return out }
            node = next
            segs.append(seg)
        }
        if let parts {
            Self.collectParts(node, &segs, parts.map { $0.segments[...] }, into: &out)
        } else {
            Self.collectSubtree(node, &segs, into: &out)
        }
        return out
    }

    /// The subscriptions `change` concerns (see `matching(base:parts:)`).
    func matching(_ change: CommittedChange) -> [(path: Path, values: [Key: Value])] {
        switch change.kind {
        case .set: return matching(base: change.path, parts: nil)
        case .merge(let parts): return matching(base: change.path, parts: parts.map(\.0))
        }
    }

    // MARK: - Recursion

    private static func insert(_ value: Value, for key: Key, into node: inout Node, _ rest: ArraySlice<String>) -> Bool {
        guard let seg = rest.first else {
            return node.here.updateValue(value, forKey: key) == nil
        }
        return insert(value, for: key, into: &node.children[seg, default: Node()], rest.dropFirst())
    }

    private static func remove(_ key: Key, from node: inout Node, _ rest: ArraySlice<String>) -> Value? {
        guard let seg = rest.first else { return node.here.removeValue(forKey: key) }
        guard node.children[seg] != nil else { return nil }
        let removed = remove(key, from: &node.children[seg]!, rest.dropFirst())
        if node.children[seg]!.isEmpty { node.children.removeValue(forKey: seg) }
        return removed
    }

    private static func collectSubtree(_ node: Node, _ segs: inout [String], into out: inout [(path: Path, values: [Key: Value])]) {
        if !node.here.isEmpty { out.append((Path(validated: segs), node.here)) }
        for (seg, child) in node.children {
            segs.append(seg)
            collectSubtree(child, &segs, into: &out)
            segs.removeLast()
        }
    }

    /// `node` lies on the way to the merge's parts (`rests`: what remains of each part's path
    /// below it). A part that ends here takes the whole subtree; otherwise the node itself is
    /// affected (a put of the parts below it) and the walk goes on towards each part.
    private static func collectParts(_ node: Node, _ segs: inout [String], _ rests: [ArraySlice<String>],
                                     into out: inout [(path: Path, values: [Key: Value])]) {
        if rests.contains(where: \.isEmpty) {
            collectSubtree(node, &segs, into: &out)
            return
        }
        if !node.here.isEmpty { out.append((Path(validated: segs), node.here)) }
        var bySegment: KeyMap<[ArraySlice<String>]> = [:]
        var order: [String] = []
        for r in rests {
            let seg = r.first!
            if bySegment[seg] == nil { order.append(seg) }
            bySegment[seg, default: []].append(r.dropFirst())
        }
        for seg in order {
            guard let child = node.children[seg] else { continue }
            segs.append(seg)
            collectParts(child, &segs, bySegment[seg]!, into: &out)
            segs.removeLast()
        }
    }
}
