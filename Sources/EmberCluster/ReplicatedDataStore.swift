import EmberNodeStore
import EmberCore
import EmberRaft
import EmberRules
import EmberStorage
import Foundation
import Logging
import Synchronization

/// A cluster member's store: writes go through Raft, everything else is served from this node's
/// applied state, through the same LMDB ports a single node uses (`ports`).
///
/// - Writes: the leader proposes the entry and answers once it is applied locally (the result is
///   the apply's). A follower forwards the write to the leader over the peer channel and answers
///   once the entry is committed AND applied here, so a client reading this node afterwards sees
///   its write. Without a leader a write waits `noLeaderTimeoutSeconds`, then fails with a
///   retryable error (REST 503).
/// - Reads, queries, SSE and WebSocket listeners use the local LMDB state (`LMDBReads`, with the
///   membership namespace reserved); listeners are fed by the store's commit hook, so followers
///   fan out changes too. `linearizableBarrier()` (REST `?consistency=linearizable`) waits for a
///   Raft ReadIndex first.
public final class ReplicatedDataStore: WritePort, StatusPort, ClusterControl, StoreLifecycle {
    let local: LMDBDataStore
    /// The read port (built once: it keeps the namespaces whose indexes are built).
    public let reader: LMDBReads
    let host: RaftHost
    let transport: PeerTransport
    let config: ClusterConfiguration
    let logger: Logger
    private let stopped = Atomic<Bool>(false)
    private let hashCache = StateHashCache()
    let check: CorruptionCheck

    /// Opens the store, loads Raft's state from it, binds the peer listener and starts the driver.
    /// `peerProtocols`: the levels offered by ALPN (tests pass an older build's list to stand for
    /// a member of that build).
    public static func open(directory: String, options: StoreOptions, cluster: ClusterConfiguration,
                            archive: ArchiveOptions? = nil, logger: Logger,
                            peerProtocols: [String] = PeerTLS.offered) async throws -> ReplicatedDataStore {
        try cluster.validate()
        var options = options
        // Every member keeps what the archive lacks: any of them may become the leader that writes it.
        if archive != nil { options.archiveHold = max(options.archiveHold, StoreOptions.defaultArchiveHold) }
        let tls = try PeerTLS(certificatePath: cluster.tlsCertificatePath, keyPath: cluster.tlsKeyPath,
                              caPath: cluster.tlsCAPath, applicationProtocols: peerProtocols)
        let local = try LMDBDataStore(directory: directory, options: options, logger: logger)
        let host = try await RaftHost(config: cluster, store: local.storage, logger: logger)
        let peers = PeerFrameRouter(host: host, space: local.storage.space, selfID: cluster.nodeID)
        let transport = PeerTransport(config: cluster, tls: tls, logger: logger,
                                      membershipNotice: { [weak host] in host?.notMemberNotice() }) { frame, _ in
            peers.route(frame)
        }
        peers.transport = transport
        do { try await transport.start() } catch {
            local.close()
            throw ClusterConfigError("cannot listen for peers on \(cluster.peerListen): \(error)")
        }
        let check = CorruptionCheck(store: local.storage, selfID: cluster.nodeID,
                                    interval: cluster.corruptionCheckSeconds > 0 ? .milliseconds(Int64(cluster.corruptionCheckSeconds * 1000)) : nil,
                                    logger: logger, voters: { [weak host] in host?.status.membership.voters ?? [] },
                                    learners: { [weak host] in host?.status.membership.learners ?? [] },
                                    raftLastIndex: { [weak host] in host?.status.lastIndex ?? 0 },
                                    isLeader: { [weak host] in host?.status.role == .leader },
                                    send: { [weak transport] frame, peer in transport?.send(.hashCheck(frame), to: peer) })
        peers.check = check
        host.start(transport: transport)
        check.start()
        logger.info("cluster node started", metadata: [
            "node": "\(cluster.nodeID)", "peerAddress": "\(cluster.peerListen)", "voters": "\(cluster.voters)"])
        let replicated = ReplicatedDataStore(local: local, host: host, transport: transport, config: cluster, logger: logger, check: check)
        if let archive {
            // Only the leader writes the archive; its marks go through Raft like any entry.
            try local.startArchive(archive, isLeader: { [weak host] in
                guard let s = host?.status else { return false }
                return s.role == .leader && !s.removed
            }, mark: { [weak replicated] index in
                guard let replicated else { throw ClusterError.shuttingDown }
                // A member of an older build (peer level 2 and before: 0.5.0) cannot read the entry:
                // the archive waits (entries stay held) until every member is upgraded.
                let peers = replicated.host.status.membership.voters.filter { $0 != replicated.config.nodeID }
                guard replicated.transport.peersSpeak(3, peers) else {
                    throw ClusterError.refused("a member runs a build before peer level 3 and cannot read archive marks; archiving resumes once every member is upgraded")
                }
                let payload = try replicated.checkedEntry(namespace: Archiver.markNamespace, operation: .archived(through: index), auth: .admin)
                _ = try await replicated.propose(payload)
            })
        }
        return replicated
    }

    init(local: LMDBDataStore, host: RaftHost, transport: PeerTransport, config: ClusterConfiguration, logger: Logger,
         check: CorruptionCheck) {
        self.local = local
        self.host = host
        self.transport = transport
        self.config = config
        self.logger = logger
        self.check = check
        self.reader = LMDBReads(store: local.storage, refuseReserved: Self.refuseReserved,
                                linearizableBarrier: { try await Self.readIndex(host: host, config: config) })
    }

    /// The ports the fronts use on this member.
    public var ports: NodePorts {
        let store = local.storage
        let admin = LMDBAdmin(store: store)
        let host = self.host
        var ports = NodePorts(
            reader: reader, writer: self,
            commits: LMDBCommitFeed(store: store, hiddenNamespaces: [MemberDirectory.namespace],
                                    stateReplaced: { handler in host.stateReplacedHandlers.withLock { $0.append(handler) } }),
            rules: LMDBRules(store: store, log: { namespace, text in try await self.setRules(namespace: namespace, text: text) }),
            onDisconnect: LMDBOnDisconnect(store: store, submit: { op, namespace, auth in
                try await self.logOnDisconnect(op, namespace: namespace, auth: auth)
            }),
            admin: AdminPorts(status: self, storage: admin, defrag: admin, backup: admin, cluster: self, alarms: admin,
                              archive: local.archiver),
            lifecycle: self)
        // Trigger entries go through Raft; the leader delivers (`TriggerWorker`).
        ports.triggers = LMDBTriggers(store: store, log: { namespace, op in try await self.logTriggers(namespace: namespace, op) },
                                      isLeader: { host.status.role == .leader },
                                      logsAdvance: { [weak self] in self?.membersSpeak(4) ?? false })
        return ports
    }

    /// Whether every other member, voters and learners, accepted peer protocol `level` or later
    /// on its last connection (one never reached since this node started does not count).
    func membersSpeak(_ level: Int) -> Bool {
        let m = host.status.membership
        return transport.peersSpeak(level, (m.voters + m.learners).filter { $0 != config.nodeID })
    }

    /// Logs a trigger entry through Raft (the triggers port's `log`).
    func logTriggers(namespace: String, _ op: TriggerOperation) async throws {
        try Self.refuseReserved(namespace)
        // A member of an older build (peer level 2 and before: 0.5.0) cannot read trigger entries:
        // definitions and cursors wait (events stay in the outbox) until every member is upgraded.
        let peers = host.status.membership.voters.filter { $0 != config.nodeID }
        guard transport.peersSpeak(3, peers) else {
            throw StoreUnavailable("a member runs a build before peer level 3 and cannot read trigger entries; retry once every member is upgraded")
        }
        // 0.6.0 (level 3) cannot decode `advance`: the worker logs `settle` entries until every
        // member, learners too, speaks level 4 (`TriggersPort.logsAdvance`); one that asked
        // before a member of 0.6.0 connected is refused and starts over from its cursor.
        if case .advance = op, !membersSpeak(4) {
            throw StoreUnavailable("a member runs a build before peer level 4 and cannot read trigger cursor entries (advance); cursors go as settle entries until every member is upgraded")
        }
        // 0.7.0 (level 4) refuses a definition naming a field it does not know (`batchWindowMs`):
        // its members would fire no trigger of the namespace while the others do.
        if case .define(let text) = op, TriggerSet.usesBatchWindow(text), !membersSpeak(5) {
            throw StoreUnavailable("a member runs a build before peer level 5 and cannot read \"batchWindowMs\"; define it once every member is upgraded")
        }
        let payload = try checkedEntry(namespace: namespace, operation: .triggers(op), auth: .admin)
        if case .rejected(let e) = try await propose(payload).outcome { throw LMDBTranslation.translate(e) }
    }

    /// etcd's corrupt check on demand (`POST /.ember/check/hashes`).
    public func checkHashes() async -> JSON? {
        await check.check()?.json(node: config.nodeID, alarm: local.storage.alarms.active(.corrupt))
    }

    public var appliedIndex: UInt64 { local.appliedIndex }

    /// The member directory lives in a reserved namespace; clients may not touch it.
    static func refuseReserved(_ namespace: String) throws {
        if namespace == MemberDirectory.namespace {
            throw StoreRefusal.forbidden("Namespace \(namespace) is reserved for cluster membership; use /.ember/status")
        }
        try LMDBTranslation.refuseReserved(namespace)
    }

    public func write(_ request: WriteRequest) async throws -> EmberNodeStore.WriteOutcome {
        let (payload, entry) = try self.payload(for: request)
        return try LMDBTranslation.outcome(of: try await propose(payload, entry: entry))
    }

    /// The log entry a client write becomes, checked as the leader will check it (bad input is
    /// refused here, before it costs a round trip): encoded, and as the entry it encodes.
    func payload(for request: WriteRequest) throws -> (payload: [UInt8], entry: EmberStorage.LogEntry) {
        try Self.refuseReserved(request.namespace)
        if isRemoved {
            throw StoreUnavailable("This node (\(config.nodeID)) was removed from the cluster; write to a member")
        }
        var request = request
        var textChecked = false
        if case .updateText = request.kind {
            // A member before peer level 5 cannot decode the text form: the tree form until every
            // member, learners too, reads it (a member held back later gets a snapshot,
            // `RaftHost.sendRaft`). The text form was checked by the front's scan.
            if membersSpeak(5) { textChecked = true } else { request.kind = try request.kind.asTree() }
        }
        do {
            let (encoded, entry) = try local.storage.validatedLogEntry(
                namespace: request.namespace, operation: LMDBTranslation.operation(for: request),
                auth: request.identity.writeAuth, writer: LMDBTranslation.stamp(request.writer), textChecked: textChecked)
            return (encoded, entry)
        } catch let e as StorageError {
            throw LMDBTranslation.translate(e)
        }
    }

    /// One pass checks an operation and encodes its log entry; a refusal becomes the client's error.
    func checkedEntry(namespace: String, operation: WriteOperation, auth: WriteAuth,
                      writer: WriterStamp? = nil) throws -> [UInt8] {
        do {
            return try local.storage.validatedEntry(namespace: namespace, operation: operation, auth: auth, writer: writer)
        } catch let e as StorageError {
            throw LMDBTranslation.translate(e)
        }
    }

    /// Wire-protocol bursts go to the driver without a task or a wait per write; their outcomes
    /// reach `sink` in bulk once per driver turn.
    /// Every member builds a text update's nodes from the logged text (the leader too): the
    /// front only checks it.
    public var appliesFrontNodes: Bool { false }

    public func pipelinedWriter(sink: any WriteOutcomeSink) -> (any PipelinedWriter)? {
        // The writer holds this store already: the sink's closure adds no cycle.
        ReplicatedPipelinedWriter(store: self, sink: ClusterPipelineSink(sink: sink, turn: host.sinkTurn) { [store = self] n, bytes in
            store.release(n, bytes: bytes)
        })
    }

    /// Proposes an entry through Raft; cluster failures become client errors (400 / 503).
    func propose(_ payload: [UInt8], entry: EmberStorage.LogEntry? = nil) async throws -> WriteResult {
        do { return try await submit(payload, entry: entry) } catch let e as ClusterError {
            if case .refused(let why) = e { throw StoreRefusal.badRequest(why) }
            throw StoreUnavailable(e.description)
        }
    }

    /// Logs a `.setRules` entry through Raft (the rules port's `setRules`).
    public func setRules(namespace: String, text: String) async throws {
        let payload = try checkedEntry(namespace: namespace, operation: .setRules(text: text), auth: .admin)
        if case .rejected(let e) = try await propose(payload).outcome { throw LMDBTranslation.translate(e) }
    }

    /// Logs onDisconnect bookkeeping through Raft (the onDisconnect port's entries).
    func logOnDisconnect(_ op: OnDisconnectOperation, namespace: String, auth: WriteAuth) async throws -> WriteResult {
        if case .register = op { try Self.refuseReserved(namespace) }
        if isRemoved {
            throw StoreUnavailable("This node (\(config.nodeID)) was removed from the cluster; connect to a member")
        }
        return try await propose(try checkedEntry(namespace: namespace, operation: .onDisconnect(op), auth: auth))
    }

    func submit(_ payload: [UInt8], entry: EmberStorage.LogEntry? = nil) async throws -> WriteResult {
        guard admit(1, bytes: payload.count) else { throw ClusterError.overloaded }
        defer { release(1, bytes: payload.count) }
        let (leaderDeadline, deadline) = deadlines()
        return try await withCheckedThrowingContinuation { cont in
            let w = PendingWrite(payload: payload, entry: entry, reply: .waiter(cont), leaderDeadline: leaderDeadline, deadline: deadline)
            if !host.enqueue(.write(w)) { cont.resume(throwing: ClusterError.overloaded) }
        }
    }

    /// Admission control: counts `n` more pending writes of `bytes` unless that passes
    /// `maxPendingWrites` or `maxPendingWriteBytes` (bytes alone: admitted while none are pending).
    func admit(_ n: Int, bytes: Int) -> Bool {
        guard host.pendingRequests.add(n, ordering: .relaxed).newValue <= config.maxPendingWrites else {
            host.pendingRequests.subtract(n, ordering: .relaxed)
            return false
        }
        let total = host.pendingRequestBytes.add(bytes, ordering: .relaxed).newValue
        guard total <= config.maxPendingWriteBytes || total == bytes else {
            release(n, bytes: bytes)
            return false
        }
        return true
    }

    /// Gives back what `admit` counted.
    func release(_ n: Int, bytes: Int) {
        host.pendingRequests.subtract(n, ordering: .relaxed)
        host.pendingRequestBytes.subtract(bytes, ordering: .relaxed)
    }

    /// When a write made now gives up waiting for a leader, and for its apply.
    func deadlines() -> (leader: ContinuousClock.Instant, apply: ContinuousClock.Instant) {
        let now = ContinuousClock.now
        return (now + .milliseconds(Int64(config.noLeaderTimeoutSeconds * 1000)), now + .milliseconds(Int64(config.writeTimeoutSeconds * 1000)))
    }

    /// Removed by a membership change, in our log or learned from a member's notice (a node
    /// still joining, with no voters yet, is not).
    var isRemoved: Bool { host.status.removed }

    /// Runs an operator's membership change or leadership transfer (see `ClusterAdminOperation`);
    /// a follower forwards it to the leader. Never throws: failures are answers (status + error).
    public func admin(_ operation: ClusterAdminOperation) async -> ClusterAdminAnswer {
        let deadline = ContinuousClock.now + .milliseconds(Int64(config.adminTimeoutSeconds * 1000))
        return await withCheckedContinuation { cont in
            let a = PendingAdmin(operation: operation, origin: .local(cont), deadline: deadline)
            if !host.enqueue(.admin(a)) {
                cont.resume(returning: .error(503, "The node is overloaded or stopping; retry later"))
            }
        }
    }

    /// Returns once this node has applied everything committed when it was called (a Raft
    /// ReadIndex): REST `?consistency=linearizable`.
    public func linearizableBarrier() async throws { try await Self.readIndex(host: host, config: config) }

    static func readIndex(host: RaftHost, config: ClusterConfiguration) async throws {
        guard host.pendingReads.add(1, ordering: .relaxed).newValue <= config.maxPendingReads else {
            host.pendingReads.subtract(1, ordering: .relaxed)
            throw StoreUnavailable(ClusterError.overloaded.description)
        }
        defer { host.pendingReads.subtract(1, ordering: .relaxed) }
        let deadline = ContinuousClock.now + .milliseconds(Int64(config.noLeaderTimeoutSeconds * 1000))
        do {
            try await withCheckedThrowingContinuation { (cont: CheckedContinuation<Void, any Error>) in
                if !host.enqueue(.read(PendingRead(reply: cont, deadline: deadline))) {
                    cont.resume(throwing: ClusterError.overloaded)
                }
            }
        } catch let e as ClusterError {
            throw StoreUnavailable(e.description)
        }
    }


    /// The role operators see: a learner is a follower that never votes ("learner").
    static func roleName(_ s: RaftStatus, reportRemoved: Bool = true) -> String {
        if reportRemoved && s.removed { return "removed" }
        if s.learner && s.role == .follower { return "learner" }
        return s.role == .preCandidate ? "candidate" : s.role.rawValue
    }

    public func probe() -> ClusterProbe {
        let s = host.status
        var peers: [String: ClusterProbe.Peer] = [:]
        for (id, l) in transport.linkStats() {
            peers[id] = ClusterProbe.Peer(connected: l.connected, queuedFrames: l.queued, droppedFrames: l.dropped)
        }
        let now = ContinuousClock.now
        for (id, at) in host.lastHeard.withLock({ $0 }) where id != s.id {
            var peer = peers[id, default: ClusterProbe.Peer(connected: false, queuedFrames: 0, droppedFrames: 0)]
            let silent = now - at
            peer.secondsSinceHeard = Double(silent.components.seconds) + Double(silent.components.attoseconds) / 1e18
            peers[id] = peer
        }
        if s.role == .leader {
            for (id, p) in s.progress where id != s.id {
                var peer = peers[id, default: ClusterProbe.Peer(connected: false, queuedFrames: 0, droppedFrames: 0)]
                peer.lagEntries = s.lastIndex > p.matchIndex ? s.lastIndex - p.matchIndex : 0
                let lag = FollowerLag(p, commitIndex: s.commitIndex, tickMillis: config.tickMillis)
                peer.commitLag = lag.entries
                peer.lagStalledSeconds = lag.stalledSeconds
                peers[id] = peer
            }
        }
        return ClusterProbe(id: s.id, role: Self.roleName(s, reportRemoved: false), leader: s.leaderID,
                            term: s.term, commitIndex: s.commitIndex, appliedIndex: local.appliedIndex,
                            lastIndex: s.lastIndex, peers: peers, removed: s.removed)
    }

    public var memberDirectory: MemberDirectory? {
        let directory = host.publishedDirectory.withLock { $0 }
        return directory.members.isEmpty ? nil : directory
    }

    public func nodeStatus() async throws -> JSON {
        let s = host.status
        var out: KeyMap<JSON> = [
            "id": .string(s.id),
            "role": .string(Self.roleName(s)),
            "term": .int(Int64(s.term)),
            "leader": s.leaderID.map { .string($0) } ?? .null,
            "commitIndex": .int(Int64(s.commitIndex)),
            // Commit index advances this follower made on the leader's durable notice.
            "commitsInferred": .int(Int64(clamping: s.inferredCommits)),
            "appliedIndex": .int(Int64(local.appliedIndex)),
            "lastIndex": .int(Int64(s.lastIndex)),
            "snapshotIndex": .int(Int64(s.snapshotIndex)),
            "voters": .array(s.membership.voters.map { .string($0) }),
            "learners": .array(s.membership.learners.map { .string($0) }),
            // False once removed by a membership change (and while joining, until added).
            "member": .bool(s.membership.isMember(s.id) && !s.removed),
            "members": host.publishedDirectory.withLock { $0 }.json,
            "connectedPeers": .array(transport.connectedPeers().map { .string($0) }),
            "links": .object(KeyMap(transport.linkStats().mapValues { l in
                JSON.object(["connected": .bool(l.connected), "queuedFrames": .int(Int64(l.queued)),
                         "droppedFrames": .int(Int64(clamping: l.dropped)),
                         // The peer protocol level the peer accepted (`PeerTLS`); "level2"
                         // as 0.5.0 named it (level 2 or later).
                         "level": .int(Int64(l.level)), "level2": .bool(l.level >= 2)])
            })),
            "stateHash": .string(try await hashCache.hash(of: local.storage)),
            // The corruption check's last verdict on this member (periodic or asked for), so the
            // console shows voters' and learners' hashes without running a check (null: none yet).
            "lastHashCheck": check.lastVerdict?.json(node: config.nodeID, alarm: local.storage.alarms.active(.corrupt)) ?? .null,
        ]
        if s.role == .leader {
            var peers: KeyMap<JSON> = [:]
            for (id, p) in s.progress {
                let lag = FollowerLag(p, commitIndex: s.commitIndex, tickMillis: config.tickMillis)
                peers[id] = .object(["matchIndex": .int(Int64(p.matchIndex)), "nextIndex": .int(Int64(p.nextIndex)),
                                     "state": .string(p.state.rawValue), "lag": .int(Int64(lag.entries)),
                                     "lagStalledSeconds": .double(lag.stalledSeconds)])
            }
            out["peers"] = .object(peers)
        }
        return JSON.object(out).withArchive(local.archiver)
    }

    public func shuttingDown() {
        host.stopRequested.store(true, ordering: .relaxed)
    }

    public func shutdown() async {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        check.stop()
        // Before the host: the archive's last segment is marked through Raft.
        await local.archiver?.stop()
        await host.stop()
        await transport.shutdown()
        local.close()
    }

    /// Synchronous close (protocol requirement): prefer `shutdown()`. Waits for the driver on a
    /// separate thread so no cooperative-pool thread is blocked on another.
    public func close() {
        guard !stopped.load(ordering: .acquiring) else { return }
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread { [self] in
            Task { await self.shutdown(); done.signal() }
        }
        done.wait()
    }
}

/// A wire connection's pipelined writes on a cluster node: checked here, queued to the driver in
/// one inbox slot per burst, answered through the connection's sink in request order.
struct ReplicatedPipelinedWriter: PipelinedWriter {
    let store: ReplicatedDataStore
    let sink: ClusterPipelineSink

    func enqueue(_ writes: [(tag: UInt64, request: WriteRequest)]) -> [(tag: UInt64, error: any Error)] {
        var refused: [(tag: UInt64, error: any Error)] = []
        var pending: [PendingWrite] = []
        let (leaderDeadline, deadline) = store.deadlines()
        for (tag, request) in writes {
            do {
                let (payload, entry) = try store.payload(for: request)
                pending.append(PendingWrite(payload: payload, entry: entry, reply: .sink(tag: tag, bytes: payload.count, sink),
                                            leaderDeadline: leaderDeadline, deadline: deadline))
            } catch {
                refused.append((tag, error))
            }
        }
        guard !pending.isEmpty else { return refused }
        let overloaded = StoreUnavailable(ClusterError.overloaded.description)
        let bytes = pending.reduce(0) { $0 + $1.payload.count }
        guard store.admit(pending.count, bytes: bytes) else { return refused + pending.map { ($0.tag, overloaded) } }
        if !store.host.enqueue(.writes(pending)) {
            store.release(pending.count, bytes: bytes)
            return refused + pending.map { ($0.tag, overloaded) }
        }
        return refused
    }
}

extension PendingWrite {
    /// The pipelined writer's tag (only for sink replies).
    var tag: UInt64 {
        if case .sink(let tag, _, _) = reply { return tag }
        preconditionFailure("only pipelined writes carry a tag")
    }
}
