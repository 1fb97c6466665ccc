// A whole Raft cluster in one process: nodes, simulated disks and network, KV hosts, clients,
// fault injection and invariant checks. Everything derives from one seed, so a failing seed
// replays exactly (no system randomness, no wall clock, no Dictionary-order dependence).

import EmberRaft
import EmberRaftHost

public struct SimFailure: Error, CustomStringConvertible, Sendable {
    public var message: String
    public var time: Int
    public var description: String { "t=\(time): \(message)" }
}

/// One node plus the host around it: the host core (EmberRaftHost, as the cluster runtime runs
/// it) and what performs its effects (disk, KV state machine, requests awaiting answers).
struct SimHost {
    let id: NodeID
    var core: HostCore?  // nil while crashed
    /// Raft's state (read-only: every change goes through `core`).
    var node: RaftNode? { core?.node }
    var disk: SimDisk
    var kv = KVStore()
    var kvApplied: UInt64 = 0
    /// Client writes waiting to be proposed or forwarded (`SimOptions.forwarding`).
    var forwards = ForwardQueue<SimWrite, Int>()
    /// Proposed writes awaiting apply, by log index.
    var pendingWrites: [UInt64: (term: UInt64, opID: UInt64, historyID: Int, client: Int)] = [:]
    /// Reads awaiting `.readReady`, by read id.
    var pendingReads: [UInt64: (historyID: Int, client: Int, key: String)] = [:]
    /// Follower: the snapshot being received (volatile: lost in a crash, like Raft's own record).
    var staging: (metadata: SnapshotMetadata, data: [UInt8])?
    /// Leader: the image answering `.prepareSnapshot`, read by `.sendSnapshotChunk`.
    var snapshotImage: SimImage?
    /// The image answering `.prepareSnapshot` (index, size), handed to the core at the node's
    /// next tick, as a real host's would be (written off its loop).
    var prepared: (index: UInt64, size: Int)?
    var restartAt = 0
    /// When the host fsyncs entries it wrote without being forced to (see `SimOptions.maxFsyncDelay`).
    var fsyncDueAt: Int?
    /// Crash before the pending fsync (`SimOptions.crashBeforeFsyncRate`).
    var crashDue = false
    /// Highest commit index this node advanced to as leader that was checked for durability.
    var checkedCommit: UInt64 = 0
    /// The last entry made durable and not yet reported with `Event.persisted`.
    var persistedReport: (index: UInt64, term: UInt64)?
    var appliedBeforeCrash: UInt64 = 0
    var restarts = 0
    /// When the host steps `.flushLearners` (`SimOptions.learnerFlushDelay`).
    var learnerFlushAt: Int?
}

struct SimClient {
    var busy: (historyID: Int, since: Int)?
    var leaderHint: NodeID?
    var lastSeen: [String: Int64] = [:]
}

public final class SimCluster {
    public let seed: UInt64
    public let options: SimOptions
    var rng: SplitMix64
    var hosts: [SimHost] = []
    var network = SimNetwork<Message>()
    /// Client writes forwarded by followers and the leader's answers (SimCluster+Forwarding).
    var forwardNet: SimNetwork<SimForward> = {
        var n = SimNetwork<SimForward>()
        n.fifo = true
        return n
    }()
    /// Log index each client write was applied at (a write applied twice is a failure).
    var appliedOps: [UInt64: UInt64] = [:]
    /// The outcomes of the proposals stepped since it was last emptied, in order (a forwarded
    /// batch or a queue the leader proposes as one `.proposeBatch`).
    var lastProposals: [ForwardResult] = []
    var clients: [SimClient]
    public internal(set) var history = History()
    public internal(set) var now = 0
    var invariants = SimInvariants()
    var nextOpID: UInt64 = 0
    var nextReadID: UInt64 = 0
    var nextValue: Int64 = 0
    var faultsEnabled = true
    /// Nodes whose removal was proposed; never re-added (they keep their old state).
    var removed: Set<NodeID> = []
    /// Set while a client proposal is being stepped, to attribute `.proposalAccepted/Rejected`.
    var proposing: (historyID: Int, client: Int, opID: UInt64)?
    /// The reason of the latest `.proposalRejected` (membership changes read it).
    var lastRejection: ProposalRejection?
    /// The turn being performed kept the configuration it started with (`checkSentToLearner`).
    var sendsUnderConfig = false

    public internal(set) var completedOps = 0
    public internal(set) var unknownOps = 0
    /// Coverage counters, to make sure runs exercise the interesting paths.
    public internal(set) var stats = SimStats()

    public init(seed: UInt64, options: SimOptions) {
        self.seed = seed
        self.options = options
        self.rng = SplitMix64(seed: seed)
        clients = Array(repeating: SimClient(), count: options.clients)
        let ids = (1...options.nodeCount).map { "n\($0)" }
        let learners = (0..<options.learners).map { "n\(options.nodeCount + 1 + $0)" }
        for id in ids + learners {
            var h = SimHost(id: id, core: nil, disk: SimDisk(.bootstrap(voters: ids, learners: learners)))
            h.core = HostCore(node: RaftNode(id: id, config: raftConfig(for: id, restart: 0), state: h.disk.durable))
            hosts.append(h)
        }
    }

    func raftConfig(for id: NodeID, restart: Int) -> RaftConfig {
        var c = options.raft
        c.randomSeed = seed &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(restart) &* 0x1000_0001 &+ stableHash(id)
        return c
    }

    /// Runs the fault phase, then heals everything and lets the cluster settle; checks liveness
    /// and linearizability at the end. Throws on the first violated invariant.
    public func run() throws {
        let faultEnd = options.faultTicks * options.tickInterval
        let end = faultEnd + options.settleTicks * options.tickInterval
        while now < end {
            if now == faultEnd { endFaults() }
            if faultsEnabled && now % options.tickInterval == 0 { try injectFaults() }
            try restartDueNodes()
            for i in hosts.indices where hosts[i].crashDue {
                hosts[i].crashDue = false
                if hosts.count - upCount < max(1, (options.nodeCount - 1) / 2) {
                    stats.crashesBeforeFsync += 1
                    crash(i)
                }
            }
            for i in hosts.indices where hosts[i].node != nil && (hosts[i].fsyncDueAt ?? Int.max) <= now {
                syncDisk(i)
                try reportPersisted(i)
            }
            // A node's messages due at the same time are one turn of its host (as the runtime
            // batches its inbox): every one is stepped before the turn's effects are performed.
            var turns: [(host: Int, events: [Event])] = []
            for m in network.due(at: now, rng: &rng) {
                guard let dst = hostIndex(m.to), hosts[dst].node != nil, network.connected(m.from, m.to) else { continue }
                if let t = turns.firstIndex(where: { $0.host == dst }) { turns[t].events.append(.receive(m)) } else { turns.append((dst, [.receive(m)])) }
            }
            for t in turns {
                if t.events.count > 1 { stats.multiInputTurns += 1 }
                try stepTurn(t.host, t.events)
            }
            for i in hosts.indices where hosts[i].node != nil && (now + i * 3) % options.tickInterval == 0 {
                if let p = hosts[i].prepared {
                    hosts[i].prepared = nil
                    _ = hosts[i].core!.handle(.snapshotPrepared(index: p.index, size: p.size))  // joins the tick's turn
                }
                try step(i, .tick)
            }
            for i in hosts.indices where hosts[i].node != nil && (hosts[i].learnerFlushAt ?? Int.max) <= now {
                hosts[i].learnerFlushAt = nil
                stats.learnerFlushes += 1
                try step(i, .flushLearners)
            }
            if faultsEnabled { try runClients() }
            if options.forwarding { try runForwarding() }
            now += 1
        }
        try checkConverged()
        history.closeAll()
        switch LinearizabilityChecker.check(history.operations) {
        case .ok: break
        case .unknown: stats.linearizabilityInconclusive += 1
        case .illegal(let key): throw fail("history not linearizable for key \(key)")
        }
    }

    /// FNV-1a of the node id (`hashValue` is randomized per process and would break replay).
    func stableHash(_ id: NodeID) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in id.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        return h
    }

    func fail(_ message: String) -> SimFailure { SimFailure(message: message, time: now) }

    func hostIndex(_ id: NodeID) -> Int? { hosts.firstIndex { $0.id == id } }

    // MARK: Stepping a node and performing its actions

    func step(_ i: Int, _ event: Event) throws {
        try stepTurn(i, [event])
    }

    /// One turn of node `i`'s host: the events stepped in order (proposal outcomes answered at
    /// once), then the turn's plan performed. `inputWaiting` as the runtime sees its inbox: more
    /// messages for the node are already due next.
    func stepTurn(_ i: Int, _ events: [Event]) throws {
        guard hosts[i].core != nil else { return }
        // The configuration the turn's sends were made under, if it did not change during the
        // turn (checked by `checkSentToLearner` against the one at perform time).
        let configAtStart = hosts[i].node!.configIndex
        for event in events {
            guard hosts[i].core != nil else { return }
            try perform(i, hosts[i].core!.handle(.event(event)))
        }
        sendsUnderConfig = hosts[i].node.map { $0.configIndex == configAtStart } ?? false
        let waiting = network.hasDue(at: now + 1, to: hosts[i].id)
        let plan = hosts[i].core!.handle(.endTurn(inputWaiting: waiting))
        if hosts[i].core!.deferredApply.count > 0 { stats.deferredApplies += 1 }
        if plan.filter({ if case .installSnapshot = $0 { true } else { false } }).count > 1 { stats.turnsInstallingTwoSnapshots += 1 }
        // Before the effects run: their fsyncs (an apply's) must not be what makes it true.
        try checkCommitDurable(i)
        try perform(i, plan)
        try reportPersisted(i)
        guard let node = hosts[i].node else { return }
        if node.learnerSendsHeld {
            stats.learnerHolds += 1
            if hosts[i].learnerFlushAt == nil, let delay = options.learnerFlushDelay { hosts[i].learnerFlushAt = now + delay }
        }
        if try invariants.checkNode(node, time: now) { stats.leadersElected += 1 }
        // Compact once enough has been applied beyond the last snapshot (the core holds it back
        // while an apply is deferred or an image is being prepared).
        if node.appliedIndex >= node.log.snapshotIndex + UInt64(options.compactThreshold) {
            let compacted = hosts[i].core!.handle(.compact(index: node.appliedIndex))
            if !compacted.isEmpty {
                assert(hosts[i].kvApplied == node.appliedIndex)
                stats.compactions += 1
                try perform(i, compacted)
                try reportPersisted(i)
            }
        }
    }

    /// A leader's new commit index must name an entry on the disks (not just in the memory) of a
    /// majority: what survives any crash. Catches a leader counting its own unsynced entries.
    func checkCommitDurable(_ i: Int) throws {
        guard let n = hosts[i].node else { return }
        // Only what it commits as leader (under its current configuration): commits learned as a
        // follower were counted by an earlier leader, possibly under another configuration.
        guard n.role == .leader, n.commitIndex > hosts[i].checkedCommit else {
            hosts[i].checkedCommit = n.commitIndex
            return
        }
        hosts[i].checkedCommit = n.commitIndex
        let index = n.commitIndex
        guard let term = n.log.term(at: index) else { return }
        var holders = 0
        // Voters only: a leader counting a learner's copy would fail here.
        for h in hosts where n.membership.contains(h.id) {
            let d = h.disk.durable
            let base = d.snapshot.index
            if index <= base || (index - base <= UInt64(d.entries.count) && d.entries[Int(index - base - 1)].term == term) {
                holders += 1
            }
        }
        if holders < n.membership.quorum {
            throw fail("\(n.id) committed \(index) (term \(term)) held durably by \(holders) of \(n.membership.voters) voters")
        }
    }

    /// A leader sends a learner committed entries only (`RaftNode.replicationEnd`): every
    /// AppendEntries to a member its configuration names a learner ends at or below the commit
    /// index it carries. Checked when the turn did not change the configuration (a send made
    /// before a demotion stepped in the same turn went to a voter).
    func checkSentToLearner(_ i: Int, _ m: Message) throws {
        guard case .appendEntries(let a) = m.payload, let node = hosts[i].node, node.role == .leader,
              node.membership.isLearner(m.to), let last = a.entries.last else { return }
        stats.learnerAppends += 1
        guard sendsUnderConfig else { return }
        if last.index > a.commit {
            throw fail("\(node.id) sent learner \(m.to) entries through \(last.index) beyond the commit index \(a.commit)")
        }
    }

    /// fsync: everything written so far becomes durable (and is reported after the step).
    func syncDisk(_ i: Int) {
        hosts[i].fsyncDueAt = nil
        if let last = hosts[i].disk.fsync() { hosts[i].persistedReport = last }
    }

    /// Steps `.persisted` for entries made durable (after the step whose actions wrote them, so
    /// steps' actions stay in order).
    func reportPersisted(_ i: Int) throws {
        guard hosts[i].node != nil, let r = hosts[i].persistedReport else { return }
        hosts[i].persistedReport = nil
        stats.persistedReports += 1
        try step(i, .persisted(through: r.index, term: r.term))
    }

    /// Performs the core's effects in order. A `.persist` is buffered on the disk and forced
    /// out before the next effect that must follow it (any but a leader's replication send, which
    /// may precede durability): its fsync may come later, and a crash meanwhile loses it.
    func perform(_ i: Int, _ effects: [HostEffect]) throws {
        for effect in effects {
            switch effect {
            case .persist(let w):
                if let hs = w.hardState { hosts[i].disk.write(.persistHardState(hs)) }
                if !w.entries.isEmpty {
                    hosts[i].disk.write(.persistEntries(w.entries))
                    try invariants.recordPersisted(w.entries, in: hosts[i].node!.log, node: hosts[i].id, time: now)
                }
                if !w.apply.isEmpty {
                    if !syncsLazily(i) { syncDisk(i) }  // one transaction with the append
                    for e in w.apply { try apply(i, e) }
                }
            case .installSnapshot(let meta, let tail):
                // The staged snapshot becomes the state machine (atomically, at the fsync), then
                // the log Raft holds after it.
                guard let staged = hosts[i].staging, staged.metadata == meta else { throw fail("install without a staged snapshot") }
                hosts[i].disk.write(.persistSnapshot(meta, discardLog: true), image: SimImage(index: meta.index, data: staged.data))
                if !tail.isEmpty { hosts[i].disk.write(.persistEntries(tail)) }
            case .compacted(let meta):
                // The state machine (durable by itself in a real store) covers it.
                guard hosts[i].kvApplied >= meta.index else { throw fail("compacted past the applied state") }
                hosts[i].disk.write(.persistSnapshot(meta, discardLog: false), image: SimImage(index: hosts[i].kvApplied, data: hosts[i].kv.serialized()))
            case .stageSnapshotChunk(let chunk):
                stats.snapshotChunksStaged += 1
                if chunk.offset == 0 { hosts[i].staging = (chunk.metadata, []) }
                guard var staged = hosts[i].staging, staged.metadata == chunk.metadata, staged.data.count == chunk.offset else {
                    throw fail("snapshot chunk at \(chunk.offset) staged out of order")
                }
                staged.data += chunk.data
                hosts[i].staging = staged
            case .prepareSnapshot:
                guard hosts[i].prepared == nil else { throw fail("a second snapshot image asked for before the first was answered") }
                let image = SimImage(index: hosts[i].kvApplied, data: hosts[i].kv.serialized())
                hosts[i].snapshotImage = image
                hosts[i].prepared = (image.index, image.data.count)
            case .sendSnapshotChunk(let req):
                syncDisk(i)  // a send
                guard let image = hosts[i].snapshotImage, image.index == req.metadata.index, image.data.count == req.totalSize else {
                    // Not the image Raft means (replaced): prepare a current one; Raft restarts.
                    try perform(i, hosts[i].core!.handle(.snapshotUnavailable))
                    continue
                }
                let data = Array(image.data[req.offset..<req.offset + req.length])
                network.send(req.message(data: data), now: now, options: options, rng: &rng, lossless: !faultsEnabled)
            case .send(let m):
                try checkSentToLearner(i, m)
                switch m.payload {
                case .appendEntries, .heartbeat:
                    // A leader replicating may send before its own entries are durable (contract
                    // 2's exception): they are fsynced later, or lost by a crash meanwhile.
                    if !hosts[i].disk.pending.isEmpty {
                        stats.sendsBeforeFsync += 1
                        if faultsEnabled && rng.chance(options.crashBeforeFsyncRate) { hosts[i].crashDue = true }
                    }
                case .appendEntriesResponse where syncsLazily(i):
                    // Acknowledged before it is synced: a crash before the sync loses it.
                    if !hosts[i].disk.pending.isEmpty {
                        stats.learnerAcksBeforeSync += 1
                        if faultsEnabled && rng.chance(options.crashBeforeFsyncRate) { hosts[i].crashDue = true }
                    }
                default:
                    syncDisk(i)  // contract: persist before send
                }
                network.send(m, now: now, options: options, rng: &rng, lossless: !faultsEnabled)
            case .restoredSnapshot(let snap):
                stats.snapshotsInstalled += 1
                syncDisk(i)
                guard let staged = hosts[i].staging, staged.metadata == snap, let kv = KVStore(deserializing: staged.data) else {
                    throw fail("bad snapshot data")
                }
                hosts[i].staging = nil
                hosts[i].kv = kv
                hosts[i].kvApplied = snap.index
                try invariants.recordState(index: snap.index, fingerprint: kv.fingerprint, node: hosts[i].id, time: now)
                for idx in hosts[i].pendingWrites.keys.sorted() where idx <= snap.index {
                    // Covered by the snapshot: outcome unknown to this host; let the client time out.
                    hosts[i].pendingWrites[idx] = nil
                }
            case .apply(let entries, _):
                if !syncsLazily(i) { syncDisk(i) }
                for e in entries { try apply(i, e) }
            case .readReady(let readID, let index):
                syncDisk(i)
                guard hosts[i].kvApplied >= index else { throw fail("read released before apply") }
                if let r = hosts[i].pendingReads.removeValue(forKey: readID) {
                    finish(r.client, r.historyID, .value(hosts[i].kv.get(r.key)))
                }
            case .readFailed(let readID):
                if let r = hosts[i].pendingReads.removeValue(forKey: readID) {
                    history.discard(r.historyID)
                    clients[r.client].busy = nil
                    clients[r.client].leaderHint = nil
                }
            case .proposalAccepted(let index, let term):
                lastProposals.append(.accepted(index: index, term: term))
                if let p = proposing {
                    hosts[i].pendingWrites[index] = (term, p.opID, p.historyID, p.client)
                }
            case .proposalRejected(let reason):
                lastRejection = reason
                if case .notLeader(let hint) = reason { lastProposals.append(.notLeader(hint: hint)) } else { lastProposals.append(.notLeader(hint: nil)) }
                if let p = proposing {
                    history.discard(p.historyID)
                    clients[p.client].busy = nil
                    if case .notLeader(let hint) = reason { clients[p.client].leaderHint = hint } else { clients[p.client].leaderHint = nil }
                }
            }
        }
        // Written but not forced out: the host syncs it soon (a crash before then loses it).
        if !hosts[i].disk.pending.isEmpty && hosts[i].fsyncDueAt == nil {
            hosts[i].fsyncDueAt = now + rng.below(options.maxFsyncDelay + 1)
        }
    }

    /// A learner that acknowledges and applies before it syncs (`SimOptions.learnersSyncLazily`).
    func syncsLazily(_ i: Int) -> Bool {
        options.learnersSyncLazily && hosts[i].node?.isLearner == true
    }

    private func apply(_ i: Int, _ e: LogEntry) throws {
        guard e.index == hosts[i].kvApplied + 1 else {
            throw fail("\(hosts[i].id) applied \(e.index) after \(hosts[i].kvApplied)")
        }
        try invariants.recordCommitted(e, node: hosts[i].id, time: now)
        var casResult = true
        var opID: UInt64?
        if e.kind == .normal {
            guard let cmd = KVCommand(decoding: e.data) else { throw fail("undecodable command at \(e.index)") }
            casResult = hosts[i].kv.apply(cmd)
            opID = cmd.opID
            // Every replica applies the same log: one write, one index (never proposed twice).
            if let at = appliedOps[cmd.opID], at != e.index {
                throw fail("client write \(cmd.opID) applied twice, at \(at) and \(e.index)")
            }
            appliedOps[cmd.opID] = e.index
        }
        hosts[i].kvApplied = e.index
        try invariants.recordState(index: e.index, fingerprint: hosts[i].kv.fingerprint, node: hosts[i].id, time: now)
        if let w = hosts[i].pendingWrites.removeValue(forKey: e.index) {
            if w.term == e.term && opID == w.opID {
                finish(w.client, w.historyID, casResultOutput(historyID: w.historyID, casResult))
            } else {
                // Another entry won this index: our proposal was never committed anywhere.
                guard history.isOpen(w.historyID) else { return }
                history.discard(w.historyID)
                clients[w.client].busy = nil
            }
        }
    }

    private func casResultOutput(historyID: Int, _ result: Bool) -> KVOutput {
        pendingKinds[historyID] == .cas ? .casResult(result) : .ok
    }

    enum OpKind { case put, get, cas }
    var pendingKinds: [Int: OpKind] = [:]

    func finish(_ client: Int, _ historyID: Int, _ output: KVOutput) {
        guard history.isOpen(historyID) else { return }  // already timed out
        history.complete(historyID, output: output)
        pendingKinds[historyID] = nil
        completedOps += 1
        clients[client].busy = nil
    }
}
