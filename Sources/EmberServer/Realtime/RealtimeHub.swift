import EmberCore
import Synchronization

/// The node's WebSocket sessions by namespace; fans committed changes out to them.
public final class RealtimeHub: Sendable {
    public struct Limits: Sendable {
        /// WebSocket connections per node.
        public var maxConnections = 100_000
        public var session = RealtimeSession.Limits()
        public init() {}
    }

    /// One listen of one session in the index.
    struct ListenRef: Hashable, Sendable {
        let session: ObjectIdentifier
        let key: String
    }

    private let sessions = Mutex<[String: [String: RealtimeSession]]>([:])
    /// Every listen by namespace and path: a change visits only the listens on its paths
    /// (writers that do not listen, and listens elsewhere, cost the fan-out nothing).
    private let index = Mutex<[String: PathIndex<ListenRef, RealtimeSession>]>([:])
    public let limits: Limits
    /// Connections cut off because they stopped reading (`RealtimeSession.cutOff`).
    public let slowConsumerCutOffs = SlowConsumerCount()
    /// The node's change feed (nil for a hub published to directly, as in tests).
    let feed: ChangeFeed?

    public init(limits: Limits = Limits(), feed: ChangeFeed? = nil) {
        self.limits = limits
        self.feed = feed
    }

    public var connectionCount: Int { sessions.withLock { $0.values.reduce(0) { $0 + $1.count } } }

    /// Listens across all sessions (for status and metrics).
    public var listenCount: Int { index.withLock { $0.values.reduce(0) { $0 + $1.count } } }

    func open(id: String, namespace: String, address: String? = nil, base: Identity = .anonymous) -> RealtimeSession? {
        sessions.withLock { all in
            guard all.values.reduce(0, { $0 + $1.count }) < limits.maxConnections else { return nil }
            let s = RealtimeSession(id: id, namespace: namespace, address: address, base: base, limits: limits.session,
                                    slowConsumers: slowConsumerCutOffs, feed: feed)
            s.listenIndexChanged.withLock {
                $0 = { [weak self] session, path, key, added in self?.indexListen(session, path, key, added) }
            }
            all[namespace, default: [:]][id] = s
            return s
        }
    }

    /// Whether the session `id` of `namespace` is still open here (onDisconnect's sweep of
    /// sessions that ended without their writes running).
    func isOpen(namespace: String, id: String) -> Bool {
        sessions.withLock { $0[namespace]?[id] != nil }
    }

    /// The open session `id` of `namespace` (a reconnecting client's `ls`).
    func session(namespace: String, id: String) -> RealtimeSession? {
        sessions.withLock { $0[namespace]?[id] }
    }

    func close(_ session: RealtimeSession) {
        sessions.withLock { all in
            all[session.namespace]?.removeValue(forKey: session.id)
            if all[session.namespace]?.isEmpty == true { all.removeValue(forKey: session.namespace) }
        }
        session.removeFromIndex()
    }

    /// Adds the namespaces some listen of this hub is on to `namespaces`, read under the lock
    /// a listen is indexed under before its initial read (the commit feed's check, once per
    /// commit: `CommitFeedPort.onCommit(watched:_:)`).
    func addWatchedNamespaces(to namespaces: inout Set<String>) {
        index.withLock { all in for ns in all.keys { namespaces.insert(ns) } }
    }

    /// Keeps the index in step with a session's listens (under the session's lock).
    private func indexListen(_ session: RealtimeSession, _ path: Path, _ key: String, _ added: Bool) {
        let ref = ListenRef(session: ObjectIdentifier(session), key: key)
        index.withLock { all in
            let ns = session.namespace
            if added {
                all[ns, default: PathIndex()].insert(session, for: ref, at: path)
            } else if all[ns]?.remove(ref, at: path) != nil, all[ns]?.isEmpty == true {
                all.removeValue(forKey: ns)
            }
        }
    }

    /// Called in commit order (by the node's `ChangeFeed`). Visits only the listens the index
    /// finds on the change's paths. Each location's frames are built once (and encoded once for
    /// sockets); every connection's frames are queued here, in commit order, and the socket
    /// writes are handed to the event loops in groups (`FlushBatch`), not one task each.
    public func publish(_ change: CommittedChange) {
        let matched = index.withLock { $0[change.namespace]?.matching(change) ?? [] }
        guard !matched.isEmpty else { return }
        let shared = SharedFrames(change: change)
        let batch = FlushBatch()
        defer { batch.submitAll() }
        for (path, listens) in matched {
            let frames = SharedPathFrames(shared, path: path)
            for (ref, session) in listens { session.deliver(frames, key: ref.key, batch: batch) }
        }
    }

    /// After a rules change: every session of `namespace` drops the listens it may no longer read.
    func revoke(namespace: String, stillAllowed: (Path, QuerySpec, Identity) -> Bool) {
        let targets = sessions.withLock { $0[namespace].map { Array($0.values) } ?? [] }
        for s in targets { s.revokeListens(stillAllowed: stillAllowed) }
    }

    /// After the node's state was replaced from a snapshot: every listening session resends
    /// its listens' complete data (`RealtimeSession.resync`). Runs after the install and before
    /// later changes are published; each location is read once, outside the sessions' locks.
    func resync(stillAllowed: (String, Path, QuerySpec, Identity) -> Bool,
                read: (String, Path) throws -> ReadResult) {
        let targets = sessions.withLock { $0.flatMap { ns, sessions in sessions.values.map { (ns, $0) } } }
            .filter { $0.1.listenCount > 0 }
        var reads: [String: [Path: ReadResult]] = [:]
        let paths = targets.map { $0.1.listenedPaths }
        for ((ns, _), listened) in zip(targets, paths) {
            for path in listened where reads[ns]?[path] == nil {
                // A location that cannot be read (storage failure) is not resent; the session
                // is dropped below so its client reconnects rather than keep the old state.
                if let r = try? read(ns, path) { reads[ns, default: [:]][path] = r }
            }
        }
        for ((ns, session), listened) in zip(targets, paths) {
            let mine = reads[ns] ?? [:]
            if listened.contains(where: { mine[$0] == nil }) {
                session.finish(reason: "state replaced from a snapshot; the new state could not be read")
                continue
            }
            session.resync(reads: mine) { path, query, identity in stillAllowed(ns, path, query, identity) }
        }
    }

    /// Closes every connection WITHOUT the shutdown message (which tells SDKs not to come back):
    /// they reconnect and resynchronise (on shutdown, and when the state was replaced from a snapshot).
    public func dropAll(reason: String) {
        let all = sessions.withLock { all -> [RealtimeSession] in
            defer { all.removeAll() }
            return all.values.flatMap(\.values)
        }
        for s in all { s.finish(reason: reason) }
    }
}
