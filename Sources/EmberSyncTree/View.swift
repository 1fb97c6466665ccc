import EmberCore

/// One query's view at a sync point: its caches, registrations and event generation (SDK `View`).
struct View {
    let query: SyncQuery
    private let processor: ViewProcessor
    private let generator: EventGenerator
    private(set) var viewCache: ViewCache
    private(set) var registrations: [RegistrationID] = []
    /// The event cache's children in query order (for the previous sibling of child events).
    private var sorted: SortedChildren

    init(query: SyncQuery, initialViewCache: ViewCache) {
        self.query = query
        let filter = makeFilter(for: query.spec)
        processor = ViewProcessor(filter: filter)
        generator = EventGenerator(query: query)
        var none: ChildChangeAccumulator? = nil
        let server = initialViewCache.serverCache
        let event = initialViewCache.eventCache
        let serverSnap = filter.indexedFilter.updateFullNode(.empty, server.node, &none)
        let eventSnap = filter.updateFullNode(.empty, event.node, &none)
        viewCache = ViewCache(
            eventCache: CacheNode(node: eventSnap, fullyInitialized: event.fullyInitialized, filtered: filter.filtersNodes),
            serverCache: CacheNode(node: serverSnap, fullyInitialized: server.fullyInitialized, filtered: false))
        sorted = SortedChildren(index: query.spec.index, node: eventSnap)
    }

    var isEmpty: Bool { registrations.isEmpty }
    var loadsAllData: Bool { query.spec.loadsAllData }

    /// The server data this view has (its hash goes with the listen).
    var serverCacheNode: Node { viewCache.serverCache.node }

    /// Complete server data at `path` below this view, if the view knows it.
    func completeServerCache(_ path: Path) -> Node? {
        guard let cache = viewCache.completeServerSnap else { return nil }
        if loadsAllData || (!path.isRoot && !cache.immediateChild(path.first!).isEmpty) {
            return cache.descendant(path)
        }
        return nil
    }

    var completeEventCache: Node? { viewCache.completeEventSnap }

    mutating func addRegistration(_ id: RegistrationID) {
        if !registrations.contains(id) { registrations.append(id) }
    }

    /// Removes one registration, or all when `id` is nil.
    mutating func removeRegistration(_ id: RegistrationID?) {
        if let id { registrations.removeAll { $0 == id } } else { registrations.removeAll() }
    }

    mutating func apply(_ operation: Operation, _ writes: WriteTreeRef, _ completeServerCache: Node?) -> [Event] {
        let result = processor.apply(viewCache, operation, writes, completeServerCache)
        viewCache = result.viewCache
        sorted.update(result.changes, eventCache: viewCache.eventCache.node)
        return generator.events(for: result.changes, eventCache: viewCache.eventCache.node, sorted: sorted,
                                registrations: registrations)
    }

    /// Events replaying the current data to a new registration.
    func initialEvents(for id: RegistrationID) -> [Event] {
        let eventSnap = viewCache.eventCache
        var changes: [Change] = []
        if !eventSnap.node.isLeaf {
            for named in eventSnap.node.sortedChildren(by: .priority) { changes.append(.childAdded(named.key, named.node)) }
        }
        if eventSnap.fullyInitialized { changes.append(.value(eventSnap.node)) }
        return generator.events(for: changes, eventCache: eventSnap.node, sorted: sorted, registrations: [id])
    }
}
