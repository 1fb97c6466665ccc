import EmberCore

/// A cached node with completeness flags (SDK `CacheNode`).
struct CacheNode: Sendable {
    var node: Node
    /// The node is the complete data at its location (possibly filtered to a query window).
    var fullyInitialized: Bool
    /// The node holds only a query's window, not every child.
    var filtered: Bool

    static let emptyIncomplete = CacheNode(node: .empty, fullyInitialized: false, filtered: false)

    func isCompleteForPath(_ path: Path) -> Bool {
        guard let front = path.first else { return fullyInitialized && !filtered }
        return isCompleteForChild(front)
    }

    func isCompleteForChild(_ key: String) -> Bool {
        (fullyInitialized && !filtered) || node.hasChild(key)
    }

    var completeNode: Node? { fullyInitialized ? node : nil }
}

/// The two caches of a view: what events were raised for, and what the server sent.
struct ViewCache: Sendable {
    var eventCache: CacheNode
    var serverCache: CacheNode

    func updatingEventSnap(_ node: Node, complete: Bool, filtered: Bool) -> ViewCache {
        ViewCache(eventCache: CacheNode(node: node, fullyInitialized: complete, filtered: filtered), serverCache: serverCache)
    }

    func updatingServerSnap(_ node: Node, complete: Bool, filtered: Bool) -> ViewCache {
        ViewCache(eventCache: eventCache, serverCache: CacheNode(node: node, fullyInitialized: complete, filtered: filtered))
    }

    var completeEventSnap: Node? { eventCache.completeNode }
    var completeServerSnap: Node? { serverCache.completeNode }
}
