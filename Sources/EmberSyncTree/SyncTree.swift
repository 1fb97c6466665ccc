// EmberSyncTree: the client's event engine (the Firebase SDKs' sync tree): listens, server
// cache, pending local writes and the events each operation raises. Passes the SDKs' spec cases.
// Must not: do I/O, read clocks or start threads (EmberClient drives it on one queue).

import EmberCore

/// The client's event engine: active listens, server cache and pending local writes; every
/// operation returns the events to raise (SDK `SyncTree`). Pure and deterministic: no I/O,
/// clocks or threads; confine an instance to one isolation domain.
public final class SyncTree {
    private var syncPoints = ImmutableTree<SyncPoint>.empty
    private var pendingWrites = WriteTree()
    private var tagToQuery: [Int: SyncQuery] = [:]
    private var queryToTag: [SyncQuery: Int] = [:]
    private var nextTag = 1
    private let listenProvider: any ListenProvider
    /// Consulted for a new view's initial server data when the tree has none (disk cache).
    public var serverCacheSource: (any ServerCacheSource)?

    public init(listenProvider: any ListenProvider) {
        self.listenProvider = listenProvider
    }

    // MARK: - Local writes

    /// A local set (`visible: false` for transactions that do not apply locally).
    public func applyUserOverwrite(_ path: Path, _ node: Node, writeId: Int, visible: Bool = true) -> [Event] {
        pendingWrites.addOverwrite(path, node, writeId: writeId, visible: visible)
        guard visible else { return [] }
        return applyToSyncPoints(.overwrite(.user, path, node))
    }

    /// A local multi-path update: `children` maps paths relative to `path` to new nodes.
    public func applyUserMerge(_ path: Path, _ children: [(Path, Node)], writeId: Int) -> [Event] {
        pendingWrites.addMerge(path, children, writeId: writeId)
        return applyToSyncPoints(.merge(.user, path, ImmutableTree(writes: children)))
    }

    /// The server confirmed (`revert: false`) or rejected (`revert: true`) a local write.
    public func ackUserWrite(_ writeId: Int, revert: Bool = false) -> [Event] {
        guard let write = pendingWrites.write(writeId) else { return [] }
        guard pendingWrites.removeWrite(writeId) else { return [] }
        var affected = ImmutableTree<Bool>.empty
        if write.snap != nil {
            affected = affected.setting(.root, true)
        } else {
            for (rel, _) in write.children ?? [] { affected = affected.setting(rel, true) }
        }
        return applyToSyncPoints(.ackUserWrite(write.path, affected: affected, revert: revert))
    }

    /// Ids of the pending (unacknowledged) writes, oldest first.
    public var pendingWriteIds: [Int] { pendingWrites.allWrites.map(\.writeId) }

    // MARK: - Server data

    public func applyServerOverwrite(_ path: Path, _ node: Node) -> [Event] {
        applyToSyncPoints(.overwrite(.server, path, node))
    }

    public func applyServerMerge(_ path: Path, _ children: [(Path, Node)]) -> [Event] {
        applyToSyncPoints(.merge(.server, path, ImmutableTree(writes: children)))
    }

    /// The server finished sending initial data for a default listen at `path`.
    public func applyListenComplete(_ path: Path) -> [Event] {
        applyToSyncPoints(.listenComplete(.server, path))
    }

    /// Data for the filtering query with `tag`; `path` is absolute, at or below the query's path.
    public func applyTaggedQueryOverwrite(_ path: Path, _ node: Node, tag: Int) -> [Event] {
        guard let query = tagToQuery[tag], let rel = query.path.relative(path) else { return [] }
        return applyTagged(query, .overwrite(.serverTaggedQuery(query.spec), rel, node))
    }

    public func applyTaggedQueryMerge(_ path: Path, _ children: [(Path, Node)], tag: Int) -> [Event] {
        guard let query = tagToQuery[tag], let rel = query.path.relative(path) else { return [] }
        return applyTagged(query, .merge(.serverTaggedQuery(query.spec), rel, ImmutableTree(writes: children)))
    }

    public func applyTaggedListenComplete(_ path: Path, tag: Int) -> [Event] {
        guard let query = tagToQuery[tag], let rel = query.path.relative(path) else { return [] }
        return applyTagged(query, .listenComplete(.serverTaggedQuery(query.spec), rel))
    }

    // MARK: - Listens

    /// Adds a registration for `query`; returns the events replaying known data to it alone.
    public func addEventRegistration(_ query: SyncQuery, _ id: RegistrationID) -> [Event] {
        let path = query.path
        var serverCache: Node? = nil
        var foundAncestorDefaultView = false
        syncPoints.foreachOnPath(path) { pointPath, point in
            let rel = pointPath.relative(path)!
            serverCache = serverCache ?? point.completeServerCache(rel)
            foundAncestorDefaultView = foundAncestorDefaultView || point.hasCompleteView
        }
        var point = syncPoints.get(path) ?? SyncPoint()
        foundAncestorDefaultView = foundAncestorDefaultView || point.hasCompleteView
        serverCache = serverCache ?? point.completeServerCache(.root)
        if serverCache == nil, !point.viewExists(for: query.spec) {
            serverCache = serverCacheSource?.completeServerCache(for: query)
        }

        let serverCacheComplete = serverCache != nil
        if serverCache == nil {
            var partial = Node.empty
            let subtree = syncPoints.subtree(path)
            for key in subtree.sortedChildKeys {
                if let child = subtree.children[key]!.value?.completeServerCache(.root) {
                    partial = partial.updatingImmediateChild(key, child)
                }
            }
            serverCache = partial
        }

        let viewAlreadyExists = point.viewExists(for: query.spec)
        if !viewAlreadyExists && !query.spec.loadsAllData {
            let tag = nextTag
            nextTag += 1
            queryToTag[query] = tag
            tagToQuery[tag] = query
        }
        let writes = WriteTreeRef(treePath: path, writeTree: pendingWrites)
        let events = point.addRegistration(query, id, writes, serverCache: serverCache,
                                           serverCacheComplete: serverCacheComplete)
        syncPoints = syncPoints.setting(path, point)
        if !viewAlreadyExists && !foundAncestorDefaultView {
            setupListener(query)
        }
        return events
    }

    /// Removes registration `id` (all registrations when nil) from `query`; the default query
    /// removes it from every view at the path. Returns cancel events (none: errors are not modelled).
    @discardableResult
    public func removeEventRegistration(_ query: SyncQuery, _ id: RegistrationID?) -> [Event] {
        let path = query.path
        guard var point = syncPoints.get(path), query.spec.isDefault || point.viewExists(for: query.spec) else {
            return []
        }
        let removed = point.removeRegistration(query, id)
        syncPoints = point.isEmpty ? syncPoints.removing(path) : syncPoints.setting(path, point)

        let removingDefault = removed.contains { $0.spec.loadsAllData }
        let covered = syncPoints.findOnPath(path) { _, p in p.hasCompleteView ? true : nil } ?? false
        if removingDefault && !covered {
            let subtree = syncPoints.subtree(path)
            if !subtree.isEmpty {
                for view in collectDistinctViews(subtree) {
                    listenProvider.startListening(view.query.forListening, tag: tag(for: view.query))
                }
            }
        }
        if !covered && !removed.isEmpty {
            if removingDefault {
                listenProvider.stopListening(SyncQuery(path: path), tag: nil)
            } else {
                for q in removed { listenProvider.stopListening(q.forListening, tag: tag(for: q)) }
            }
        }
        for q in removed where !q.spec.loadsAllData {
            if let tag = queryToTag.removeValue(forKey: q) { tagToQuery[tag] = nil }
        }
        return []
    }

    /// The tag of a filtering query's server listen.
    public func tag(for query: SyncQuery) -> Int? { queryToTag[query] }

    public func query(forTag tag: Int) -> SyncQuery? { tagToQuery[tag] }

    // MARK: - Reads

    /// The latest local value at `path`: server data plus pending writes (hidden ones included),
    /// leaving out `excluding` write ids (for transactions). Nil when the client knows neither
    /// complete server data nor a complete local write there (a transaction then starts from null).
    public func calcCompleteEventCache(_ path: Path, excluding writeIds: Set<Int> = []) -> Node? {
        let serverCache: Node? = syncPoints.findOnPath(path) { pointPath, point in
            point.completeServerCache(pointPath.relative(path)!)
        }
        if serverCache == nil
            && !pendingWrites.hasCompleteWrite(path, excluding: writeIds, includeHiddenWrites: true) {
            return nil
        }
        return pendingWrites.calcCompleteEventCache(path, serverCache, excluding: writeIds, includeHiddenWrites: true)
    }

    /// `serverCache` (complete server data from elsewhere, e.g. the disk cache) with the pending
    /// visible writes at `path` applied: what a read shows when no view holds the data.
    public func calcEventCache(_ path: Path, serverCache: Node) -> Node {
        pendingWrites.calcCompleteEventCache(path, serverCache) ?? serverCache
    }

    /// The server data `query`'s view holds, complete or not (a filtering query's window).
    public func serverCacheNode(for query: SyncQuery) -> (node: Node, complete: Bool)? {
        guard let cache = syncPoints.get(query.path)?.view(for: query.spec)?.viewCache.serverCache else { return nil }
        return (cache.node, cache.fullyInitialized)
    }

    /// The hash of the server data cached for `query`'s view (sent as `h` with its listen).
    public func serverHash(for query: SyncQuery) -> String {
        syncPoints.get(query.path)?.view(for: query.spec)?.serverCacheNode.firebaseHash ?? ""
    }

    /// Whether any registration listens at exactly this query.
    public func isListening(_ query: SyncQuery) -> Bool {
        syncPoints.get(query.path)?.viewExists(for: query.spec) ?? false
    }

    // MARK: - Internals

    private func setupListener(_ query: SyncQuery) {
        let tag = tag(for: query)
        listenProvider.startListening(query.forListening, tag: tag)
        if tag != nil { return }
        // A new default listen covers the filtering and deeper listens below it.
        let subtree = syncPoints.subtree(query.path)
        let toStop: [SyncQuery] = subtree.fold { rel, point, childResults in
            if !rel.isRoot, let point, let complete = point.completeView { return [complete.query] }
            var queries = point?.queryViews.map(\.query) ?? []
            for (_, r) in childResults { queries += r }
            return queries
        }
        for q in toStop { listenProvider.stopListening(q.forListening, tag: self.tag(for: q)) }
    }

    private func collectDistinctViews(_ subtree: ImmutableTree<SyncPoint>) -> [View] {
        subtree.fold { _, point, childResults in
            if let point, let complete = point.completeView { return [complete] }
            var views = point?.queryViews ?? []
            for (_, r) in childResults { views += r }
            return views
        }
    }

    private func applyTagged(_ query: SyncQuery, _ operation: Operation) -> [Event] {
        guard var point = syncPoints.get(query.path) else { return [] }
        let writes = WriteTreeRef(treePath: query.path, writeTree: pendingWrites)
        let events = point.apply(operation, writes, nil)
        syncPoints = syncPoints.setting(query.path, point)
        return events
    }

    private func applyToSyncPoints(_ operation: Operation) -> [Event] {
        let writes = WriteTreeRef(treePath: .root, writeTree: pendingWrites)
        return Self.applyHelper(operation, &syncPoints, nil, writes)
    }

    private static func applyHelper(_ operation: Operation, _ tree: inout ImmutableTree<SyncPoint>,
                                    _ serverCache: Node?, _ writes: WriteTreeRef) -> [Event] {
        if operation.path.isRoot { return applyDescendants(operation, &tree, serverCache, writes) }
        var serverCache = serverCache
        if serverCache == nil, let point = tree.value { serverCache = point.completeServerCache(.root) }
        var events: [Event] = []
        let childKey = operation.path.first!
        if tree.children[childKey] != nil, let childOp = operation.forChild(childKey) {
            let childServerCache = serverCache?.immediateChild(childKey)
            events += applyHelper(childOp, &tree.children[childKey]!, childServerCache, writes.child(childKey))
        }
        if tree.value != nil { events += tree.value!.apply(operation, writes, serverCache) }
        return events
    }

    private static func applyDescendants(_ operation: Operation, _ tree: inout ImmutableTree<SyncPoint>,
                                         _ serverCache: Node?, _ writes: WriteTreeRef) -> [Event] {
        var serverCache = serverCache
        if serverCache == nil, let point = tree.value { serverCache = point.completeServerCache(.root) }
        var events: [Event] = []
        for key in tree.sortedChildKeys {
            guard let childOp = operation.forChild(key) else { continue }
            let childServerCache = serverCache?.immediateChild(key)
            events += applyDescendants(childOp, &tree.children[key]!, childServerCache, writes.child(key))
        }
        if tree.value != nil { events += tree.value!.apply(operation, writes, serverCache) }
        return events
    }
}
