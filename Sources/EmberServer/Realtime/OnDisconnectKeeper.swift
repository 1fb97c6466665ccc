import EmberCore
import Foundation
import Logging
import Synchronization

/// This node's side of durable onDisconnect (`OnDisconnectCommand`): its sessions' writes live
/// in the replicated log, named by the node and its incarnation (a token picked at each start),
/// so they run even when this node dies.
///
/// - A node logs `holder` for its incarnation before its first registration (and at start when
///   an earlier incarnation left writes); its sessions register, cancel and, on a clean
///   disconnect, `run` their writes through the log.
/// - The leader (a single node is its own) logs `seal` for a member with pending writes it has
///   not heard from for `leaseSeconds` (or that left the membership that long ago), then `run`
///   for every session of an incarnation that no longer holds its node's sessions: a crashed or
///   cut-off node's, and the previous incarnation's after a restart.
/// - A node whose incarnation was sealed while it was cut off drops its connections (its clients
///   reconnect and register again) and starts a new incarnation.
/// - Every node also runs the sessions of its own incarnation that are no longer connected (a
///   `run` that failed, or a registration whose answer was lost and that committed after it).
/// Writes are deleted when they run, so whoever logs a `run`, they run once.
public final class OnDisconnectKeeper: Sendable {
    public struct Settings: Sendable {
        /// How long the leader waits for a silent member before running its sessions' writes
        /// (`--ondisconnect-lease`). Longer than an election, so a leader change seals nobody.
        public var leaseSeconds: Double = 10
        /// Period of the keeper's check of the bookkeeping.
        public var pollMillis = 500
        /// Sessions one check runs at most (each is a log entry).
        public var maxRunsPerPoll = 256
        /// Every this many checks, the node looks for its own sessions that ended unrun.
        public var ownSweepPolls = 10
        public init() {}
    }

    struct State {
        var incarnation = OnDisconnectKeeper.newIncarnation()
        /// Our `holder` entry for `incarnation` is applied here.
        var confirmed = false
        /// Leader bookkeeping: the term we lead and since when we know it; members we saw leave.
        var leaderTerm: UInt64?
        var leaderSince = ContinuousClock.now
        var nonMemberSince: [String: ContinuousClock.Instant] = [:]
        var polls = 0
        /// Sessions whose `run` failed, and when to try again (at most `maxRunsPerPoll` kept).
        var retryAfter: [OnDisconnectRef: ContinuousClock.Instant] = [:]
    }

    /// Where the bookkeeping is logged and read.
    let port: any OnDisconnectPort
    /// This node's Raft view and the cluster's members (nil on a single node).
    let cluster: (any ClusterControl)?
    let status: any StatusPort
    let realtime: RealtimeHub
    let settings: Settings
    let logger: Logger
    private let state = Mutex(State())
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(store: NodePorts, realtime: RealtimeHub, settings: Settings, logger: Logger) {
        self.port = store.onDisconnect
        self.cluster = store.admin.cluster
        self.status = store.admin.status
        self.realtime = realtime
        self.settings = settings
        self.logger = logger
    }

    /// This node's id in the bookkeeping (a single node is "single", as in its status).
    var nodeID: String { cluster?.probe().id ?? "single" }

    static func newIncarnation() -> String {
        String(UInt64.random(in: 0...UInt64.max), radix: 16)
    }

    public var incarnation: String { state.withLock { $0.incarnation } }

    func start() {
        let period = Duration.milliseconds(settings.pollMillis)
        task.withLock { t in
            precondition(t == nil, "the keeper starts once")
            t = Task { [weak self] in
                while !Task.isCancelled {
                    await self?.poll()
                    try? await Task.sleep(for: period)
                }
            }
        }
    }

    func stop() async {
        let t = task.withLock { t in defer { t = nil }; return t }
        t?.cancel()
        await t?.value
    }

    // MARK: - The sessions' side

    /// Logs a write to run when `session` ends; as the session's current identity.
    func register(_ write: WriteRequest, for session: RealtimeSession) async throws {
        let ref = try await name(of: session)
        let logged = try await port.log(.register(session: ref, write: OnDisconnectWrite(path: write.path, kind: write.kind)),
                                        namespace: session.namespace, identity: session.identity)
        guard logged else { throw Self.expired }
    }

    /// `oc`: drops the session's writes at or below `path` everywhere.
    func cancel(at path: Path, for session: RealtimeSession) async throws {
        guard let ref = session.onDisconnectSession else { return }  // nothing was registered
        _ = try await port.log(.cancel(session: ref, path: path), namespace: session.namespace, identity: .admin)
    }

    /// The session ended: its writes run now (if this fails, a later check runs them).
    func ended(_ session: RealtimeSession) async {
        guard let ref = session.onDisconnectSession else { return }
        await run(ref, namespace: session.namespace)
    }

    static let expired = StoreUnavailable(
        "This node's onDisconnect sessions expired (it was cut off from the cluster); reconnect and register again")

    /// The session's name in the log: fixed by its first registration, with the incarnation
    /// whose `holder` entry is applied (logged first if needed).
    func name(of session: RealtimeSession) async throws -> OnDisconnectRef {
        let current = try await confirmedIncarnation()
        if let ref = session.onDisconnectSession {
            // A session of a sealed incarnation is being dropped; it may not register more.
            guard ref.incarnation == current else { throw Self.expired }
            return ref
        }
        let ref = OnDisconnectRef(node: nodeID, incarnation: current, id: session.id)
        session.onDisconnectSession = ref
        return ref
    }

    /// The incarnation, once its `holder` entry is applied here.
    func confirmedIncarnation() async throws -> String {
        let (inc, confirmed) = state.withLock { ($0.incarnation, $0.confirmed) }
        if confirmed { return inc }
        _ = try await port.log(.holder(node: nodeID, incarnation: inc), namespace: OnDisconnectCommand.bookkeepingNamespace,
                               identity: .admin)
        state.withLock { if $0.incarnation == inc { $0.confirmed = true } }
        return inc
    }

    func run(_ ref: OnDisconnectRef, namespace: String) async {
        do {
            _ = try await port.log(.run(session: ref), namespace: namespace, identity: .admin)
            state.withLock { _ = $0.retryAfter.removeValue(forKey: ref) }
        } catch {
            logger.warning("onDisconnect run failed; retried later", metadata: ["session": "\(ref)", "error": "\(error)"])
            state.withLock { s in
                guard s.retryAfter.count < settings.maxRunsPerPoll || s.retryAfter[ref] != nil else { return }
                s.retryAfter[ref] = ContinuousClock.now + .milliseconds(Int64(settings.leaseSeconds * 1000))
            }
        }
    }

    // MARK: - The periodic check

    func poll() async {
        let book = port
        do {
            let me = nodeID
            // Read before the holders: a `holder` entry confirmed meanwhile is no seal.
            let before = state.withLock { s in s.confirmed ? s.incarnation : nil }
            let holders = try book.holders()
            if let before, holders[me] != before, sealedHere(before) { return }
            let (inc, confirmed, ownSweep) = state.withLock { s -> (String, Bool, Bool) in
                s.polls += 1
                return (s.incarnation, s.confirmed, s.polls % max(1, settings.ownSweepPolls) == 0)
            }
            // A node logs `holder` only once it has a use for it (a registration, or writes an
            // earlier incarnation of it left, which then become orphans): an idle node's start
            // leaves the state (and its hash) alone.
            if !confirmed, try !book.sessions(limit: 1, include: { node, i, _, _ in node == me && i != inc }).isEmpty {
                _ = try await confirmedIncarnation()
            }
            if confirmed && ownSweep {
                // Our sessions that ended without their writes running.
                let realtime = self.realtime
                let gone = try book.sessions(limit: settings.maxRunsPerPoll) { node, i, ns, id in
                    guard node == me && i == inc else { return false }
                    guard let ns, let id else { return true }
                    return !realtime.isOpen(namespace: ns, id: id)
                }
                for (ref, ns) in gone where due(ref) { await run(ref, namespace: ns) }
            }
            guard let term = leaderTerm() else { return }
            try await sealSilent(holders, me: me, term: term)
            // Orphans: sessions of incarnations that no longer hold their node's sessions.
            let current = try book.holders()
            let orphans = try book.sessions(limit: settings.maxRunsPerPoll) { node, i, _, _ in current[node] != i }
            for (ref, ns) in orphans where due(ref) {
                logger.info("running the onDisconnect writes of an orphaned session", metadata: ["session": "\(ref)"])
                await run(ref, namespace: ns)
            }
        } catch {
            logger.debug("onDisconnect check failed", metadata: ["error": "\(error)"])
        }
    }

    func due(_ ref: OnDisconnectRef) -> Bool {
        state.withLock { s in (s.retryAfter[ref].map { $0 <= ContinuousClock.now }) ?? true }
    }

    /// Our incarnation no longer holds our sessions (the leader sealed it while we were cut
    /// off): every connection is dropped and a new incarnation begins.
    func sealedHere(_ sealed: String) -> Bool {
        let switched = state.withLock { s -> Bool in
            guard s.confirmed, s.incarnation == sealed else { return false }
            s.incarnation = Self.newIncarnation()
            s.confirmed = false
            return true
        }
        guard switched else { return false }
        logger.warning("onDisconnect sessions of this node were expired by the leader; dropping connections",
                       metadata: ["incarnation": "\(sealed)"])
        realtime.dropAll(reason: "onDisconnect lease expired: reconnect")
        return true
    }

    /// The term this node leads (a single node always leads), noting when that began.
    func leaderTerm() -> UInt64? {
        let term: UInt64
        if let probe = cluster?.probe() {
            guard probe.role == "leader" else {
                state.withLock { $0.leaderTerm = nil }
                return nil
            }
            term = probe.term
        } else {
            term = 0
        }
        state.withLock { s in
            if s.leaderTerm != term {
                s.leaderTerm = term
                s.leaderSince = .now
                s.nonMemberSince = [:]
            }
        }
        return term
    }

    /// Seals every other node's incarnation whose node has been silent past the lease, counted
    /// from when we became leader at the earliest (we cannot have heard from it before).
    func sealSilent(_ holders: [String: String], me: String, term: UInt64) async throws {
        let probe = cluster?.probe()
        let members = Set(status.memberDirectory?.members.keys.map { $0 } ?? [])
        let now = ContinuousClock.now
        for (node, inc) in holders.sorted(by: { $0.key < $1.key }) where node != me {
            let silent: Double = state.withLock { s in
                let sinceLeader = Self.seconds(now - s.leaderSince)
                if members.contains(node) {
                    s.nonMemberSince[node] = nil
                    return min(probe?.peers[node]?.secondsSinceHeard ?? .infinity, sinceLeader)
                }
                // A node that left (or never joined): its messages may go on, its sessions do not.
                let since = s.nonMemberSince[node] ?? now
                s.nonMemberSince[node] = since
                return min(Self.seconds(now - since), sinceLeader)
            }
            guard silent > settings.leaseSeconds else { continue }
            // Only an incarnation with writes to run needs sealing.
            guard try !port.sessions(limit: 1, include: { n, i, _, _ in n == node && i == inc }).isEmpty else { continue }
            logger.warning("sealing the onDisconnect sessions of a silent node", metadata: [
                "node": "\(node)", "incarnation": "\(inc)", "silentSeconds": "\(silent)"])
            _ = try await port.log(.seal(node: node, incarnation: inc), namespace: OnDisconnectCommand.bookkeepingNamespace,
                                   identity: .admin)
        }
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
}
