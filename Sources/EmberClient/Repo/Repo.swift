import EmberCore
import EmberSyncTree
import Foundation
import Synchronization

/// Coordinates one database's sync tree with its connection (JS/iOS `Repo`): local writes are
/// applied to the sync tree first (events fire at once), then queued on the connection; server
/// data and acks come back through here. All state below `queue` is confined to it; public API
/// types only submit work to it. Callbacks are delivered on the database's callback queue.
final class Repo: @unchecked Sendable, ConnectionDelegate {
    let queue = DispatchQueue(label: "ember.client.repo")
    let handles = HandleRegistry()
    weak var database: Database?

    // Confined to `queue`.
    let syncTree: SyncTree
    let infoTree = SyncTree(listenProvider: NoListens())
    var infoRoot = Node.empty
    var registrations: [UInt: Registration] = [:]
    var nextWriteID = 1
    /// This run's name for its writes (exactly-once: each `p`/`m` carries it with the write id,
    /// so a write sent again after a lost acknowledgement is not applied twice). Writes restored
    /// from an earlier run keep the name they were first sent under.
    let writerID = WriteStamp.newWriter()
    var transactions: [TransactionRecord] = []
    var nextTransactionOrder = 0
    /// Acknowledged onDisconnect sets, oldest first (merges are stored per child).
    var onDisconnectSets: [(path: Path, data: JSON)] = []
    var keptSynced: [SyncQuery: UInt] = [:]
    private let forwarder: ListenForwarder
    /// The disk cache, when the app turned persistence on (attached before first use).
    var persistence: PersistenceManager?

    // Readable from any thread.
    private let timeOffset = Mutex<Int64>(0)
    private let pushIDs = Mutex(PushIDGenerator())
    private let callbackQueueBox: Mutex<DispatchQueue>
    private(set) var connection: PersistentConnection!

    init(websocketURLs: [String], transport: any WireTransport, policy: ReconnectPolicy, callbackQueue: DispatchQueue,
         authToken: String? = nil, authTokenProvider: AuthTokenProvider? = nil, spreadSeed: UInt64? = nil) {
        forwarder = ListenForwarder()
        syncTree = SyncTree(listenProvider: forwarder)
        callbackQueueBox = Mutex(callbackQueue)
        forwarder.repo = self
        updateInfo("connected", Node(.bool(false)))
        updateInfo("serverTimeOffset", Node(.int(0)))
        connection = PersistentConnection(urls: websocketURLs, transport: transport, policy: policy, delegate: self,
                                          authToken: authToken, tokenProvider: authTokenProvider, spreadSeed: spreadSeed)
    }

    var callbackQueue: DispatchQueue {
        get { callbackQueueBox.withLock { $0 } }
        set { callbackQueueBox.withLock { $0 = newValue } }
    }

    /// Local time corrected by the server's clock (ms since the epoch).
    var serverTime: Int64 { Int64(Date().timeIntervalSince1970 * 1000) + timeOffset.withLock { $0 } }

    func nextPushID() -> String {
        let now = serverTime
        return pushIDs.withLock { gen in
            var rng = SystemRandomNumberGenerator()
            return gen.next(now: now, using: &rng)
        }
    }

    func shutdown() { connection.submit(.shutdown) }

    // MARK: - Delivering events

    /// Sends events to their observers' callbacks, in order, on the callback queue.
    func raise(_ events: [Event]) {
        guard !events.isEmpty, let database else { return }
        let target = callbackQueue
        for event in events {
            guard let reg = registrations[UInt(event.registration.raw)], reg.eventType.syncType == event.type else { continue }
            let snapshot = DataSnapshot(node: event.node, ref: DatabaseReference(database: database, path: event.snapshotPath),
                                        index: reg.query.spec.index)
            let handles = handles
            let prev = event.prevName
            target.async {
                guard handles.isActive(reg.handle) else { return }
                reg.onEvent(snapshot, prev)
            }
        }
    }

    func deliver(_ work: @escaping @Sendable () -> Void) { callbackQueue.async(execute: work) }

    // MARK: - Observers

    func addObserver(_ reg: Registration) {
        queue.async { [self] in
            registrations[reg.handle] = reg
            let id = RegistrationID(Int(reg.handle))
            if reg.isInfo {
                var events = infoTree.addEventRegistration(reg.query, id)
                events += infoTree.applyServerOverwrite(reg.query.path, infoRoot.child(at: reg.query.path))
                events += infoTree.applyListenComplete(reg.query.path)
                raise(events)
            } else {
                raise(syncTree.addEventRegistration(reg.query, id))
            }
        }
    }

    func removeObserver(_ handle: UInt) {
        handles.deactivate(handle)
        queue.async { [self] in
            guard let reg = registrations.removeValue(forKey: handle) else { return }
            let tree = reg.isInfo ? infoTree : syncTree
            tree.removeEventRegistration(reg.query, RegistrationID(Int(handle)))
        }
    }

    /// `keepSynced`: a hidden value observer per query.
    func keepSynced(_ query: SyncQuery, _ on: Bool) {
        let handle = handles.allocate()
        queue.async { [self] in
            persistence?.keepSynced(query, on)
            if on, keptSynced[query] == nil {
                keptSynced[query] = handle
                let reg = Registration(handle: handle, query: query, eventType: .value, onEvent: { _, _ in }, onCancel: nil)
                registrations[handle] = reg
                raise(syncTree.addEventRegistration(query, RegistrationID(Int(handle))))
            } else {
                handles.deactivate(handle)
                if !on, let old = keptSynced.removeValue(forKey: query) { removeObserver(old) }
            }
        }
    }

    /// Removes every observer of `query`; for a plain location, every observer at that path
    /// (but not those of child locations).
    func removeAllObservers(_ query: SyncQuery) {
        queue.async { [self] in
            let matching = registrations.values.filter { reg in
                reg.query.path == query.path && (query.spec.isDefault || reg.query.spec == query.spec)
            }
            for reg in matching {
                handles.deactivate(reg.handle)
                registrations[reg.handle] = nil
                let tree = reg.isInfo ? infoTree : syncTree
                tree.removeEventRegistration(reg.query, RegistrationID(Int(reg.handle)))
            }
        }
    }

    /// A listen failed on the server: its observers get their cancel callback and are removed.
    private func cancelObservers(of query: SyncQuery, tag: Int?, error: any Error) {
        let matching = registrations.values.filter { reg in
            guard reg.query.path == query.path, !reg.isInfo else { return false }
            if let tag { return syncTree.tag(for: reg.query) == tag }
            return reg.query.spec.loadsAllData
        }
        for reg in matching {
            handles.deactivate(reg.handle)
            registrations[reg.handle] = nil
            syncTree.removeEventRegistration(reg.query, RegistrationID(Int(reg.handle)))
            if let onCancel = reg.onCancel { deliver { onCancel(error) } }
        }
    }

    // MARK: - Server listens (called by the sync tree, on `queue`)

    func startServerListen(_ query: SyncQuery, tag: Int?) {
        let path = query.path
        let entry = PersistentConnection.ListenEntry(
            path: path, queryWire: tag == nil ? nil : query.spec.wireObject, tag: tag,
            hash: { [weak self] in
                // Read on the Repo's queue; the Repo never waits on the connection, so no deadlock.
                guard let self else { return "" }
                return self.queue.sync { self.syncTree.serverHash(for: query) }
            },
            onComplete: { [weak self] status, data in
                guard let self else { return }
                self.queue.async {
                    if status == "ok" {
                        self.persistence?.listenComplete(query)
                        let events = tag.map { self.syncTree.applyTaggedListenComplete(path, tag: $0) }
                            ?? self.syncTree.applyListenComplete(path)
                        self.raise(events)
                    } else {
                        let error = DatabaseError.from(status: status, data: data)
                        self.cancelObservers(of: query, tag: tag, error: error)
                    }
                }
            })
        persistence?.listenStarted(query)
        connection.submit(.listen(entry))
    }

    func stopServerListen(_ query: SyncQuery, tag: Int?) {
        connection.submit(.unlisten(path: query.path, tag: tag))
        persistence?.listenStopped(query)
    }

    // MARK: - ConnectionDelegate (called from the connection; hop onto `queue` in order)

    func connection(didReceive data: JSON, at path: Path, isMerge: Bool, tag: Int?) {
        queue.async { [self] in
            let events: [Event]
            if isMerge {
                guard case .object(let obj) = data else { return }
                var children: [(Path, Node)] = []
                for (key, value) in obj {
                    guard let rel = try? Path(key), let node = try? Node(json: value) else { continue }
                    children.append((rel, node))
                }
                if children.isEmpty { return }
                // Filtering queries' windows are stored whole below, not in the server cache.
                if tag == nil { persistence?.serverMerge(path, children) }
                events = tag.map { syncTree.applyTaggedQueryMerge(path, children, tag: $0) }
                    ?? syncTree.applyServerMerge(path, children)
            } else {
                guard let node = try? Node(json: data) else { return }
                if tag == nil { persistence?.serverOverwrite(path, node) }
                events = tag.map { syncTree.applyTaggedQueryOverwrite(path, node, tag: $0) }
                    ?? syncTree.applyServerOverwrite(path, node)
            }
            raise(events)
            // A filtering query's window is stored whole, as its view now holds it.
            if let persistence, let tag, let query = syncTree.query(forTag: tag),
               let window = syncTree.serverCacheNode(for: query) {
                persistence.queryWindow(query, window.node)
            }
            // New server data may change what pending transactions should run on.
            rerunTransactionsIfNeeded()
        }
    }

    func connection(didChangeStatus connected: Bool) {
        queue.async { [self] in
            updateInfo("connected", Node(.bool(connected)))
            if !connected { runOnDisconnectLocally() }
        }
    }

    func connection(didUpdateServerTimeOffset ms: Int64) {
        timeOffset.withLock { $0 = ms }
        queue.async { [self] in updateInfo("serverTimeOffset", Node(.int(ms))) }
    }

    /// Sets `.info/<key>` and raises events for its observers.
    func updateInfo(_ key: String, _ node: Node) {
        let path = Path(validated: [".info", key])
        infoRoot = infoRoot.setting(node, at: path)
        raise(infoTree.applyServerOverwrite(path, node))
    }

    // MARK: - Reads

    /// One read: the server's answer, else the local cache, else an error (SDK `getData`).
    func get(_ query: SyncQuery, completion: @escaping @Sendable (Result<Node, any Error>) -> Void) {
        if query.path.first == ".info" {
            queue.async { [self] in
                let node = infoRoot.child(at: query.path)
                deliver { completion(.success(node)) }
            }
            return
        }
        let wire: JSON? = query.spec.isDefault ? nil : query.spec.wireObject
        connection.submit(.get(path: query.path, queryWire: wire) { [weak self] status, data in
            guard let self else { return }
            self.queue.async {
                if status == "ok", let node = try? Node(json: data) {
                    let result = query.spec.apply(to: node)
                    self.persistence?.readAnswered(query, result)
                    self.deliver { completion(.success(result)) }
                } else if let cached = self.syncTree.calcCompleteEventCache(query.path) {
                    let result = query.spec.apply(to: cached)
                    self.deliver { completion(.success(result)) }
                } else if let stored = self.persistence?.completeServerCache(for: query) {
                    // Offline with nothing in memory: the disk cache (whole data, or this query's
                    // last window), with pending writes applied.
                    let result = query.spec.apply(to: self.syncTree.calcEventCache(query.path, serverCache: stored))
                    self.deliver { completion(.success(result)) }
                } else {
                    let error = DatabaseError.from(status: status, data: data)
                    self.deliver { completion(.failure(error)) }
                }
            }
        })
    }
}
