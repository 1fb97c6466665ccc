import EmberCore

/// Supplies complete children a filter may need (e.g. to refill a limit window).
protocol CompleteChildSource {
    func completeChild(_ key: String) -> Node?
    /// The next child after `child` in `index` order (before it when `reverse`).
    func childAfterChild(_ index: QueryIndex, _ child: NamedNode, reverse: Bool) -> NamedNode?
}

struct NoCompleteChildSource: CompleteChildSource {
    func completeChild(_ key: String) -> Node? { nil }
    func childAfterChild(_ index: QueryIndex, _ child: NamedNode, reverse: Bool) -> NamedNode? { nil }
}

/// Complete children from the event cache, else from server data plus pending writes.
struct WriteTreeCompleteChildSource: CompleteChildSource {
    let writes: WriteTreeRef
    let viewCache: ViewCache
    let optCompleteServerCache: Node?

    func completeChild(_ key: String) -> Node? {
        let eventCache = viewCache.eventCache
        if eventCache.isCompleteForChild(key) { return eventCache.node.immediateChild(key) }
        let serverNode = optCompleteServerCache.map { CacheNode(node: $0, fullyInitialized: true, filtered: false) }
            ?? viewCache.serverCache
        return writes.calcCompleteChild(key, serverNode)
    }

    func childAfterChild(_ index: QueryIndex, _ child: NamedNode, reverse: Bool) -> NamedNode? {
        let completeServerData = optCompleteServerCache ?? viewCache.completeServerSnap
        return writes.calcIndexedSlice(completeServerData, startPost: child, count: 1, reverse: reverse, index: index).first
    }
}
