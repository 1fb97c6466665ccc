// Fault injection (crashes, restarts, partitions, leadership transfers) and the final liveness check.

import EmberRaft
import EmberRaftHost

extension SimCluster {
    var upCount: Int { hosts.filter { $0.node != nil }.count }

    /// The leader with the highest term among live nodes, if any.
    var currentLeader: Int? {
        var best: Int?
        for i in hosts.indices {
            guard let n = hosts[i].node, n.role == .leader else { continue }
            if best == nil || n.term > hosts[best!].node!.term { best = i }
        }
        return best
    }

    func injectFaults() throws {
        let n = options.nodeCount
        // Crash: keep a majority up so the run makes progress most of the time.
        if rng.chance(options.crashRate) && hosts.count - upCount < max(1, (n - 1) / 2) {
            let up = hosts.indices.filter { hosts[$0].node != nil }
            crash(up[rng.below(up.count)])
        }
        if rng.chance(options.partitionRate) {
            if network.isPartitioned {
                network.heal()
            } else {
                var groups: [NodeID: Int] = [:]
                if rng.below(2) == 0, let leader = currentLeader {
                    groups[hosts[leader].id] = 1  // isolate the leader
                } else {
                    for h in hosts { groups[h.id] = rng.below(2) }
                }
                network.group = groups
                stats.partitions += 1
            }
        }
        if rng.chance(options.membershipChangeRate) { try changeMembership() }
        if options.learnerChangeRate > 0 && rng.chance(options.learnerChangeRate) { try changeLearners() }
        if rng.chance(options.transferRate), let leader = currentLeader {
            let others = hosts[leader].node!.membership.voters.filter { $0 != hosts[leader].id }
            stats.transfers += 1
            if !others.isEmpty { try step(leader, .transferLeadership(to: others[rng.below(others.count)])) }
        }
    }

    /// Single-server membership churn: remove a voter (possibly the leader itself) or add a fresh node.
    func changeMembership() throws {
        guard let l = currentLeader else { return }
        let voters = hosts[l].node!.membership.voters
        if voters.count >= options.nodeCount {
            let victim = voters[rng.below(voters.count)]
            removed.insert(victim)
            stats.membershipChanges += 1
            try step(l, .proposeConfigChange(.removeVoter(victim)))
        } else {
            // Prefer a node that joined earlier but whose addition never took effect (a learner
            // named here is promoted).
            let candidate = hosts.first { !voters.contains($0.id) && !removed.contains($0.id) }?.id ?? addJoiningHost()
            stats.membershipChanges += 1
            try step(l, .proposeConfigChange(.addVoter(candidate)))
        }
    }

    /// A new, empty node that starts as a joining member (no membership of its own yet).
    func addJoiningHost() -> NodeID {
        let id = "n\(hosts.count + 1)"
        var h = SimHost(id: id, core: nil, disk: SimDisk(.joining))
        h.core = HostCore(node: RaftNode(id: id, config: raftConfig(for: id, restart: 0), state: h.disk.durable))
        hosts.append(h)
        return id
    }

    func crash(_ i: Int) {
        guard hosts[i].node != nil else { return }
        stats.crashes += 1
        // What the state machine applied: Raft counts an apply the host core deferred to the next
        // turn's write as done already (its entries may not be durable here yet, and nothing of
        // them was applied or answered).
        hosts[i].appliedBeforeCrash = hosts[i].kvApplied
        if syncsLazily(i) {
            // Its acknowledged and applied tail may be lost: durable is what it must come back
            // with (and the leader sends it the rest again).
            let d = hosts[i].disk.durable
            hosts[i].appliedBeforeCrash = min(hosts[i].kvApplied, max(hosts[i].disk.image.index, d.snapshot.index + UInt64(d.entries.count)))
            if hosts[i].appliedBeforeCrash < hosts[i].kvApplied { stats.learnerCrashesLosingApplied += 1 }
        }
        hosts[i].core = nil
        hosts[i].disk.crash()  // unsynced writes are lost
        hosts[i].fsyncDueAt = nil
        hosts[i].persistedReport = nil
        hosts[i].checkedCommit = 0
        hosts[i].pendingWrites = [:]
        hosts[i].pendingReads = [:]
        hosts[i].forwards = ForwardQueue()  // volatile: its clients' writes become unknown
        hosts[i].staging = nil
        hosts[i].snapshotImage = nil
        hosts[i].prepared = nil
        hosts[i].restartAt = now + options.tickInterval * (5 + rng.below(60))
    }

    func restartDueNodes() throws {
        for i in hosts.indices where hosts[i].node == nil && (now >= hosts[i].restartAt || !faultsEnabled) {
            try restart(i)
        }
    }

    func restart(_ i: Int) throws {
        hosts[i].restarts += 1
        var state = hosts[i].disk.durable
        try invariants.checkRestart(state, appliedBeforeCrash: hosts[i].appliedBeforeCrash, node: hosts[i].id, time: now)
        // The durable state machine image may be ahead of the compaction point (like a store
        // durable at its applied index): Raft resumes applying after it. The commit index is not
        // written (the host core writes term and vote only): it is at least what was applied.
        let image = hosts[i].disk.image
        state.hardState.commit = max(state.hardState.commit, image.index)
        hosts[i].core = HostCore(node: RaftNode(id: hosts[i].id, config: raftConfig(for: hosts[i].id, restart: hosts[i].restarts),
                                                state: state, appliedIndex: image.index))
        guard let kv = KVStore(deserializing: image.data) else { throw fail("bad durable state machine image") }
        hosts[i].kv = kv
        hosts[i].kvApplied = image.index
    }

    public var finalStats: SimStats {
        var s = stats
        s.messagesSent = network.sent
        s.committedEntries = hosts.compactMap { $0.node?.commitIndex }.max() ?? 0
        return s
    }

    func endFaults() {
        faultsEnabled = false
        network.heal()
        for i in clients.indices {
            if let b = clients[i].busy { abandon(client: i, historyID: b.historyID) }
        }
    }

    /// After healing: one leader, everyone caught up with everything it committed.
    func checkConverged() throws {
        guard let l = currentLeader, let leader = hosts[l].node else { throw fail("liveness: no leader after settling") }
        // Only current members (learners too) must catch up; removed nodes may be stuck behind forever.
        for h in hosts where leader.membership.isMember(h.id) {
            guard let n = h.node else { throw fail("liveness: \(h.id) still down") }
            if n.role == .leader && n.id != leader.id && n.term == leader.term { throw fail("two leaders") }
            if n.appliedIndex != leader.commitIndex || n.commitIndex != leader.log.lastIndex {
                let pr = leader.status.progress[n.id].map { "\($0)" } ?? "none"
                throw fail("liveness: \(n.id) applied \(n.appliedIndex) commit \(n.commitIndex) last \(n.log.lastIndex) snapshot \(n.log.snapshotIndex) term \(n.term) role \(n.role), leader \(leader.id) commit \(leader.commitIndex) last \(leader.log.lastIndex) snapshot \(leader.log.snapshotIndex) term \(leader.term); leader's progress for it: \(pr)")
            }
        }
    }
}
