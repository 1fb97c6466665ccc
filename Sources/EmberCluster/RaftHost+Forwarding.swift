import EmberNodeStore
import EmberRaft
import EmberStorage

/// Client writes from the queue to the log: the leader proposes them, a follower forwards them to
/// the leader in batches — one batch at a time, so the writes enter the log in the order they
/// reached this node, and a batch's answer comes back in one frame.
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
        guard !requests.queue.isEmpty else { return [] }
        if node.role == .leader { return proposeQueued() }
        guard requests.inFlight == nil, let leader = node.leaderID, leader != node.id else { return [] }
        if let until = requests.forwardPausedUntil, now < until { return [] }
        requests.forwardPausedUntil = nil
        sendBatch(to: leader, now: now)
        return []
    }

    func sendBatch(to leader: NodeID, now: ContinuousClock.Instant) {
        let batch = requests.takeBatch(maxWrites: Self.maxForwardBatchWrites, maxBytes: Self.maxForwardBatchBytes)
        guard !batch.isEmpty else { return }
        let id = requests.sent(batch, to: leader, now: now)
        transport.send(.forwardBatch(ForwardBatch(from: node.id, batchID: id, payloads: batch.map(\.payload))), to: leader)
    }

    /// The leader proposes its queue in order; a refused proposal (a leadership transfer under
    /// way) stops the run and keeps the rest queued for the next turn.
    func proposeQueued() -> [Action] {
        var actions: [Action] = []
        while let w = requests.queue.first {
            let stamped: [UInt8]
            // Validated by the front already (ReplicatedDataStore.write).
            do { stamped = try stamp(w.payload, validate: false) } catch {
                requests.queue.removeFirst()
                w.reply.resume(throwing: ClusterError.refused("invalid write: \(error)"))
                continue
            }
            let stepped = step(.propose(stamped))
            guard let (index, term) = stepped.acceptedProposal else { return actions + stepped }
            requests.queue.removeFirst()
            requests.awaitApply(index: index, term: term, w, appliedIndex: store.appliedIndex)
            actions += stepped
        }
        return actions
    }

    /// A follower's batch: proposed in order, answered in one frame. Once one write is bounced
    /// (not leading), every later one is too, so the follower resends them after it, in order.
    func serveForwardBatch(_ batch: ForwardBatch) -> [Action] {
        var results: [ForwardReply.Result] = []
        results.reserveCapacity(batch.payloads.count)
        var actions: [Action] = []
        var bounced: ForwardReply.Result? = node.role == .leader ? nil : .notLeader(hint: node.leaderID)
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
                let b = ForwardReply.Result.notLeader(hint: stepped.rejectionHint)
                bounced = b
                results.append(b)
            }
            actions += stepped
        }
        transport.send(.forwardBatchReply(ForwardBatchReply(from: node.id, batchID: batch.batchID, results: results)), to: batch.from)
        return actions
    }

    /// The leader answered our batch: accepted writes wait for their apply here (read-your-
    /// writes), refused ones fail, and bounced ones go back to the head of the queue with every
    /// write after them.
    func batchAnswered(_ reply: ForwardBatchReply, now: ContinuousClock.Instant) {
        guard let batch = requests.takeInFlight(reply.batchID) else { return }  // timed out already
        for (i, w) in batch.writes.enumerated() {
            guard i < reply.results.count else {
                w.reply.resume(throwing: ClusterError.outcomeUnknown("the leader's answer left it out"))
                continue
            }
            switch reply.results[i] {
            case .accepted(let index, let term):
                requests.awaitApply(index: index, term: term, w, appliedIndex: store.appliedIndex)
            case .refused(let why):
                w.reply.resume(throwing: ClusterError.refused(why))
            case .notLeader(let hint):
                requests.requeueFront(batch.writes[i...])
                if let hint, hint != reply.from, hint != node.id {
                    sendBatch(to: hint, now: now)
                } else {
                    // Nobody better known: wait a tick for Raft to learn the leader.
                    requests.forwardPausedUntil = now + .milliseconds(Int64(config.tickMillis))
                }
                return
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
