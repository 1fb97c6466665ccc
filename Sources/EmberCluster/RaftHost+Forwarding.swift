import EmberNodeStore
import EmberRaft
import EmberStorage

/// Client writes from the queue to the log: the leader proposes them, a follower forwards them
/// to the leader in batches through EmberRaft's ForwardQueue — one batch at a time, so the writes
/// enter the log in the order they reached this node, and a batch's answer comes back in one frame.
extension RaftHost {
    /// Most writes in one forwarded batch.
    static let maxForwardBatchWrites = 1_024
    /// Most payload bytes in one forwarded batch (a single larger write still goes alone; one
    /// entry is at most 16 MiB and a frame 32 MiB).
    static let maxForwardBatchBytes = 4 << 20

    /// Moves queued writes on, at the end of every turn: proposes them when leading; forwards
    /// the next batch when a leader is known and no batch is at it; else they wait (and expire
    /// after `noLeaderTimeoutSeconds`).
    func routeQueued(now: ContinuousClock.Instant) -> [Action] {
        guard !requests.forwarding.isEmpty else { return [] }
        if node.role == .leader { return proposeQueued() }
        guard let leader = node.leaderID, leader != node.id else { return [] }
        sendBatch(to: leader, now: now)
        return []
    }

    func sendBatch(to leader: NodeID, now: ContinuousClock.Instant) {
        let deadline = now + .milliseconds(Int64(config.forwardReplyTimeoutSeconds * 1000))
        guard let batch = requests.forwarding.nextBatch(to: leader, now: now, deadline: deadline, maxWrites: Self.maxForwardBatchWrites,
                                                        maxBytes: Self.maxForwardBatchBytes, size: { $0.payload.count })
        else { return }
        transport.send(.forwardBatch(ForwardBatch(from: node.id, batchID: batch.id, payloads: batch.writes.map(\.payload))), to: leader)
    }

    /// The leader proposes its queue in order; a refused proposal (a leadership transfer under
    /// way) stops the run and keeps the rest queued for the next turn.
    func proposeQueued() -> [Action] {
        var actions: [Action] = []
        while let w = requests.forwarding.first {
            let stamped: [UInt8]
            // Validated by the front already (ReplicatedDataStore.write).
            do { stamped = try stamp(w.payload, validate: false) } catch {
                requests.forwarding.removeFirst()
                w.reply.resume(throwing: ClusterError.refused("invalid write: \(error)"))
                continue
            }
            let stepped = step(.propose(stamped))
            guard let (index, term) = stepped.acceptedProposal else { return actions + stepped }
            requests.forwarding.removeFirst()
            requests.awaitApply(index: index, term: term, w, appliedIndex: store.appliedIndex)
            actions += stepped
        }
        return actions
    }

    /// A follower's batch: proposed in order, answered in one frame. Once one write is bounced
    /// (not leading), every later one is too, so the follower resends them after it, in order.
    func serveForwardBatch(_ batch: ForwardBatch) -> [Action] {
        var results: [ForwardResult] = []
        results.reserveCapacity(batch.payloads.count)
        var actions: [Action] = []
        var bounced: ForwardResult? = node.role == .leader ? nil : .notLeader(hint: node.leaderID)
        for payload in batch.payloads {
            if let bounced {
                results.append(bounced)
                continue
            }
            let stamped: [UInt8]
            do { stamped = try stamp(payload) } catch {
                results.append(.refused("invalid write: \(error)"))
                continue
            }
            let stepped = step(.propose(stamped))
            if let (index, term) = stepped.acceptedProposal {
                results.append(.accepted(index: index, term: term))
            } else {
                let b = ForwardResult.notLeader(hint: stepped.rejectionHint)
                bounced = b
                results.append(b)
            }
            actions += stepped
        }
        transport.send(.forwardBatchReply(ForwardBatchReply(from: node.id, batchID: batch.batchID, results: results)), to: batch.from)
        return actions
    }

    /// The leader answered our batch: accepted writes wait for their apply here (read-your-
    /// writes), refused ones fail, bounced ones are back at the head of the queue (ForwardQueue)
    /// and go to the leader the answer named, or wait a tick for Raft to learn one.
    func batchAnswered(_ reply: ForwardBatchReply, now: ContinuousClock.Instant) {
        guard let answer = requests.forwarding.answered(batch: reply.batchID, from: reply.from, results: reply.results) else {
            return  // timed out already
        }
        for a in answer.accepted { requests.awaitApply(index: a.index, term: a.term, a.write, appliedIndex: store.appliedIndex) }
        for r in answer.refused { r.write.reply.resume(throwing: ClusterError.refused(r.reason)) }
        for w in answer.unanswered { w.reply.resume(throwing: ClusterError.outcomeUnknown("the leader's answer left it out")) }
        if let (hint, by) = answer.bounced {
            if let hint, hint != by, hint != node.id {
                sendBatch(to: hint, now: now)
            } else {
                requests.forwarding.pausedUntil = now + .milliseconds(Int64(config.tickMillis))
            }
        }
    }
}

extension Array where Element == Action {
    /// The (index, term) a `propose` step appended at, if it did.
    var acceptedProposal: (UInt64, UInt64)? {
        for case .proposalAccepted(let index, let term) in self { return (index, term) }
        return nil
    }

    /// The leader a refused `propose` step named.
    var rejectionHint: NodeID? {
        for case .proposalRejected(.notLeader(let hint)) in self { return hint }
        return nil
    }
}
