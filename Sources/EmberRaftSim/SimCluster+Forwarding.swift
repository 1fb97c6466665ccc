// Batched forwarding of client writes (SimOptions.forwarding): clients write to any node; a
// follower forwards its queue to the leader one batch at a time with EmberRaft's ForwardQueue,
// the same type the cluster runtime uses; the leader proposes each write in order and answers
// write by write. Links are FIFO and never duplicate (TCP), but lose messages, delay them and
// get partitioned. The run fails if a write is ever applied at two indexes (SimCluster.apply).

import EmberRaft

/// A client write on its way into the log.
struct SimWrite: Sendable {
    let opID: UInt64
    let historyID: Int
    let client: Int
    let payload: [UInt8]
}

enum SimForward: SimAddressed {
    case batch(from: NodeID, to: NodeID, id: UInt64, writes: [SimWrite])
    case reply(from: NodeID, to: NodeID, id: UInt64, results: [ForwardResult])

    var from: NodeID {
        switch self {
        case .batch(let f, _, _, _), .reply(let f, _, _, _): return f
        }
    }

    var to: NodeID {
        switch self {
        case .batch(_, let t, _, _), .reply(_, let t, _, _): return t
        }
    }
}

extension SimCluster {
    func runForwarding() throws {
        for m in forwardNet.due(at: now, rng: &rng) {
            guard let dst = hostIndex(m.to), hosts[dst].node != nil, network.connected(m.from, m.to) else { continue }
            switch m {
            case .batch(let from, _, let id, let writes): try serve(dst, from: from, id: id, writes)
            case .reply(let from, _, let id, let results): answered(dst, from: from, id: id, results)
            }
        }
        for i in hosts.indices where hosts[i].node != nil {
            let expired = hosts[i].forwards.expire(now: now)
            if options.unsafeForwardRetry {
                hosts[i].forwards.requeueFront(expired)
            } else {
                for w in expired { giveUp(w) }
            }
            guard !hosts[i].forwards.isEmpty, let node = hosts[i].node else { continue }
            if node.role == .leader {
                try proposeQueued(i)
            } else if let leader = node.leaderID, leader != node.id {
                sendBatch(i, to: leader)
            }
        }
    }

    /// A client write entering at node `i` (not the leader, or not known to be).
    func enqueueForward(_ i: Int, _ w: SimWrite) {
        hosts[i].forwards.enqueue(w)
    }

    /// The outcome of a forwarded write is unknown to its client (it may yet be applied).
    private func giveUp(_ w: SimWrite) {
        guard history.isOpen(w.historyID) else { return }
        abandon(client: w.client, historyID: w.historyID)
    }

    /// The leader proposes its own queue in order, as one `.proposeBatch` (as the host does),
    /// keeping it queued when refused.
    private func proposeQueued(_ i: Int) throws {
        while !hosts[i].forwards.isEmpty {
            let writes = Array(hosts[i].forwards.waiting.prefix(options.maxForwardBatch))
            let results = try proposeBatch(i, writes)
            for (w, r) in zip(writes, results) {
                guard case .accepted(let index, let term) = r else { return }
                _ = hosts[i].forwards.removeFirst()
                hosts[i].pendingWrites[index] = (term, w.opID, w.historyID, w.client)
            }
        }
    }

    /// Steps one `.proposeBatch` of `writes` on node `i`: every write accepted, or every one
    /// refused (`.notLeader`) — anything in between is a failure.
    private func proposeBatch(_ i: Int, _ writes: [SimWrite]) throws -> [ForwardResult] {
        lastProposals = []
        try step(i, .proposeBatch(writes.map(\.payload)))
        let accepted = lastProposals.filter { if case .accepted = $0 { return true } else { return false } }.count
        guard lastProposals.count == writes.count, accepted == 0 || accepted == writes.count else {
            throw fail("a proposal batch was answered in part")
        }
        return lastProposals
    }

    private func sendBatch(_ i: Int, to leader: NodeID) {
        guard let batch = hosts[i].forwards.nextBatch(to: leader, now: now, deadline: now + options.forwardTimeout,
                                                      maxWrites: options.maxForwardBatch, maxBytes: 1 << 20,
                                                      size: { $0.payload.count }) else { return }
        stats.forwardedBatches += 1
        stats.forwardedWrites += batch.writes.count
        stats.largestForwardBatch = max(stats.largestForwardBatch, batch.writes.count)
        forwardNet.send(.batch(from: hosts[i].id, to: leader, id: batch.id, writes: batch.writes), now: now, options: options,
                        rng: &rng, lossless: !faultsEnabled)
    }

    /// The receiver of a batch proposes its writes as one `.proposeBatch` if it leads; when that
    /// is refused, or it does not lead, every write is bounced.
    private func serve(_ i: Int, from: NodeID, id: UInt64, _ writes: [SimWrite]) throws {
        let results = hosts[i].node?.role == .leader && !writes.isEmpty
            ? try proposeBatch(i, writes)
            : Array(repeating: .notLeader(hint: hosts[i].node?.leaderID), count: writes.count)
        forwardNet.send(.reply(from: hosts[i].id, to: from, id: id, results: results), now: now, options: options,
                        rng: &rng, lossless: !faultsEnabled)
    }

    private func answered(_ i: Int, from: NodeID, id: UInt64, _ results: [ForwardResult]) {
        guard let answer = hosts[i].forwards.answered(batch: id, from: from, results: results) else { return }
        for a in answer.accepted {
            if a.index <= hosts[i].kvApplied {
                giveUp(a.write)  // applied here before the answer came: its result is gone
            } else {
                hosts[i].pendingWrites[a.index] = (a.term, a.write.opID, a.write.historyID, a.write.client)
            }
        }
        for r in answer.refused { giveUp(r.write) }
        for w in answer.unanswered { giveUp(w) }
        if let (hint, by) = answer.bounced {
            stats.bouncedBatches += 1
            if let hint, hint != by, hint != hosts[i].id {
                sendBatch(i, to: hint)
            } else {
                hosts[i].forwards.pausedUntil = now + options.tickInterval
            }
        }
    }
}
