// A whole Raft cluster in one process: nodes, simulated disks and network, KV hosts, clients,
// fault injection and invariant checks. Everything derives from one seed, so a failing seed
// replays exactly (no system randomness, no wall clock, no Dictionary-order dependence).

import EmberRaft

public struct SimFailure: Error, CustomStringConvertible, Sendable {
    public var message: String
    public var time: Int
    public var description: String { "t=\(time): \(message)" }
}

/// One node plus the host around it (disk, KV state machine, requests awaiting answers).
struct SimHost {
    let id: NodeID
    var node: RaftNode?  // nil while crashed
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
    /// Host answers (`.snapshotReady`) delivered at the node's next tick, as a real host's would be.
    var pendingEvents: [Event] = []
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
        for id in ids {
            var h = SimHost(id: id, node: nil, disk: SimDisk(.bootstrap(voters: ids)))
            h.node = RaftNode(id: id, config: raftConfig(for: id, restart: 0), state: h.disk.durable)
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
            for m in network.due(at: now, rng: &rng) {
                guard let dst = hostIndex(m.to), hosts[dst].node != nil, network.connected(m.from, m.to) else { continue }
                try step(dst, .receive(m))
            }
            for i in hosts.indices where hosts[i].node != nil && (now + i * 3) % options.tickInterval == 0 {
                let answers = hosts[i].pendingEvents
                hosts[i].pendingEvents = []
                for e in answers { try step(i, e) }
                try step(i, .tick)
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
        guard hosts[i].node != nil else { return }
        // Mutate in place (no copy of the node's log).
        let actions = hosts[i].node!.step(event)
        // Before the actions run: their fsyncs (an apply's) must not be what makes it true.
        try checkCommitDurable(i)
        try perform(i, actions)
        try reportPersisted(i)
        if try invariants.checkNode(hosts[i].node!, time: now) { stats.leadersElected += 1 }
        // Compact once enough has been applied beyond the last snapshot.
        let node = hosts[i].node!
        if node.appliedIndex >= node.log.snapshotIndex + UInt64(options.compactThreshold) {
            assert(hosts[i].kvApplied == node.appliedIndex)
            stats.compactions += 1
            let more = hosts[i].node!.step(.compact(index: node.appliedIndex))
            try perform(i, more)
            try reportPersisted(i)
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

    func perform(_ i: Int, _ actions: [Action]) throws {
        for action in actions {
            switch action {
            case .persistHardState:
                hosts[i].disk.write(action)
            case .persistSnapshot(let meta, let discardLog):
                if discardLog {
                    // The staged snapshot becomes the state machine (atomically, at the fsync).
                    guard let staged = hosts[i].staging, staged.metadata == meta else { throw fail("install without a staged snapshot") }
                    hosts[i].disk.write(action, image: SimImage(index: meta.index, data: staged.data))
                } else {
                    // Compaction: the state machine (durable by itself in a real store) covers it.
                    hosts[i].disk.write(action, image: SimImage(index: hosts[i].kvApplied, data: hosts[i].kv.serialized()))
                }
            case .stageSnapshotChunk(let chunk):
                stats.snapshotChunksStaged += 1
                if chunk.offset == 0 { hosts[i].staging = (chunk.metadata, []) }
                guard var staged = hosts[i].staging, staged.metadata == chunk.metadata, staged.data.count == chunk.offset else {
                    throw fail("snapshot chunk at \(chunk.offset) staged out of order")
                }
                staged.data += chunk.data
                hosts[i].staging = staged
            case .prepareSnapshot:
                guard hosts[i].pendingEvents.isEmpty else { continue }  // one in preparation
                let image = SimImage(index: hosts[i].kvApplied, data: hosts[i].kv.serialized())
                hosts[i].snapshotImage = image
                hosts[i].pendingEvents.append(.snapshotReady(index: image.index, size: image.data.count))
            case .sendSnapshotChunk(let req):
                syncDisk(i)  // a send
                guard let image = hosts[i].snapshotImage, image.index == req.metadata.index, image.data.count == req.totalSize else {
                    // Not the image Raft means (replaced): prepare a current one; Raft restarts.
                    try perform(i, [.prepareSnapshot])
                    continue
                }
                let data = Array(image.data[req.offset..<req.offset + req.length])
                network.send(req.message(data: data), now: now, options: options, rng: &rng, lossless: !faultsEnabled)
            case .persistEntries(let entries):
                hosts[i].disk.write(action)
                try invariants.recordPersisted(entries, in: hosts[i].node!.log, node: hosts[i].id, time: now)
            case .send(let m):
                switch m.payload {
                case .appendEntries, .heartbeat:
                    // A leader replicating may send before its own entries are durable (contract
                    // 2's exception): they are fsynced later, or lost by a crash meanwhile.
                    if !hosts[i].disk.pending.isEmpty {
                        stats.sendsBeforeFsync += 1
                        if faultsEnabled && rng.chance(options.crashBeforeFsyncRate) { hosts[i].crashDue = true }
                    }
                default:
                    syncDisk(i)  // contract: persist before send
                }
                network.send(m, now: now, options: options, rng: &rng, lossless: !faultsEnabled)
            case .restoreSnapshot(let snap):
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
            case .apply(let entries):
                syncDisk(i)
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
