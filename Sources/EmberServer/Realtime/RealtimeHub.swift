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

    private let sessions = Mutex<[String: [String: RealtimeSession]]>([:])
    /// The sessions with at least one listen, by namespace: the only ones a change can concern
    /// (writers that do not listen cost the fan-out nothing).
    private let listening = Mutex<[String: [String: RealtimeSession]]>([:])
    public let limits: Limits

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    public var connectionCount: Int { sessions.withLock { $0.values.reduce(0) { $0 + $1.count } } }

    /// Listens across all sessions (for status and metrics; walks every session).
    public var listenCount: Int {
        let all = sessions.withLock { $0.values.flatMap(\.values) }
        return all.reduce(0) { $0 + $1.listenCount }
    }

    func open(id: String, namespace: String, address: String? = nil, base: Identity = .anonymous) -> RealtimeSession? {
        sessions.withLock { all in
            guard all.values.reduce(0, { $0 + $1.count }) < limits.maxConnections else { return nil }
            let s = RealtimeSession(id: id, namespace: namespace, address: address, base: base, limits: limits.session)
            s.listeningChanged.withLock { $0 = { [weak self] session, on in self?.setListening(session, on) } }
            all[namespace, default: [:]][id] = s
            return s
        }
    }

    func close(_ session: RealtimeSession) {
        sessions.withLock { all in
            all[session.namespace]?.removeValue(forKey: session.id)
            if all[session.namespace]?.isEmpty == true { all.removeValue(forKey: session.namespace) }
        }
        setListening(session, false)
    }

    private func setListening(_ session: RealtimeSession, _ on: Bool) {
        listening.withLock { all in
            let ns = session.namespace
            if on {
                all[ns, default: [:]][session.id] = session
            } else if all[ns]?.removeValue(forKey: session.id) != nil, all[ns]?.isEmpty == true {
                all.removeValue(forKey: ns)
            }
        }
    }

    /// Called by the store in commit order.
    public func publish(_ change: CommittedChange) {
        let targets = listening.withLock { $0[change.namespace].map { Array($0.values) } ?? [] }
        guard !targets.isEmpty else { return }
        let shared = SharedFrames(change: change)
        for s in targets { s.deliver(shared) }
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
        let targets = listening.withLock { $0.flatMap { ns, sessions in sessions.values.map { (ns, $0) } } }
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
