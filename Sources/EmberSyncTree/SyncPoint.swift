import EmberCore

/// All views at one location (SDK `SyncPoint`).
struct SyncPoint {
    /// Views by query spec, in creation order.
    private(set) var views: [QuerySpec: View] = [:]
    private var order: [QuerySpec] = []

    var isEmpty: Bool { views.isEmpty }

    var allViews: [View] { order.map { views[$0]! } }

    /// Views of filtering queries (those that do not load all data).
    var queryViews: [View] { allViews.filter { !$0.loadsAllData } }

    var completeView: View? { allViews.first { $0.loadsAllData } }
    var hasCompleteView: Bool { completeView != nil }

    func view(for spec: QuerySpec) -> View? {
        spec.loadsAllData ? completeView : views[spec]
    }

    func viewExists(for spec: QuerySpec) -> Bool { view(for: spec) != nil }

    func completeServerCache(_ path: Path) -> Node? {
        for view in allViews { if let c = view.completeServerCache(path) { return c } }
        return nil
    }

    mutating func apply(_ operation: Operation, _ writes: WriteTreeRef, _ completeServerCache: Node?) -> [Event] {
        if let spec = operation.source.queryId {
            guard views[spec] != nil else { return [] }
            return views[spec]!.apply(operation, writes, completeServerCache)
        }
        var events: [Event] = []
        for spec in order { events += views[spec]!.apply(operation, writes, completeServerCache) }
        return events
    }

    mutating func addRegistration(_ query: SyncQuery, _ id: RegistrationID, _ writes: WriteTreeRef,
                                  serverCache: Node?, serverCacheComplete: Bool) -> [Event] {
        if views[query.spec] == nil {
            var eventCache = writes.calcCompleteEventCache(serverCacheComplete ? serverCache : nil)
            var eventCacheComplete = eventCache != nil
            if eventCache == nil {
                if let serverCache, !serverCache.isLeaf {
                    eventCache = writes.calcCompleteEventChildren(serverCache)
                } else {
                    eventCache = .empty
                }
                eventCacheComplete = false
            }
            let viewCache = ViewCache(
                eventCache: CacheNode(node: eventCache!, fullyInitialized: eventCacheComplete, filtered: false),
                serverCache: CacheNode(node: serverCache ?? .empty, fullyInitialized: serverCacheComplete, filtered: false))
            views[query.spec] = View(query: query, initialViewCache: viewCache)
            order.append(query.spec)
        }
        views[query.spec]!.addRegistration(id)
        return views[query.spec]!.initialEvents(for: id)
    }

    /// Removes a registration (from every view for the default query). Returns the queries whose
    /// views went away, plus the default query if this point lost its complete view.
    mutating func removeRegistration(_ query: SyncQuery, _ id: RegistrationID?) -> [SyncQuery] {
        var removed: [SyncQuery] = []
        let hadCompleteView = hasCompleteView
        let targets = query.spec.isDefault ? order : (views[query.spec] != nil ? [query.spec] : [])
        for spec in targets {
            views[spec]!.removeRegistration(id)
            if views[spec]!.isEmpty {
                let view = views.removeValue(forKey: spec)!
                order.removeAll { $0 == spec }
                if !view.loadsAllData { removed.append(view.query) }
            }
        }
        if hadCompleteView && !hasCompleteView { removed.append(SyncQuery(path: query.path)) }
        return removed
    }
}
