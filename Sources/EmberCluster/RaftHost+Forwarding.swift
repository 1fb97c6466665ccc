import EmberNodeStore
import EmberRaft
import EmberRaftHost
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
    func routeQueued(now: ContinuousClock.Instant) {
        if node.role == .leader {
            proposeTurn()
            return
        }
        // Leadership was lost during the turn: the batches it held go back to their senders.
        let held = requests.heldBatches
        requests.heldBatches = []
        for batch in held { bounce(batch) }
        guard !requests.forwarding.isEmpty else { return }
        guard let leader = node.leaderID, leader != node.id else { return }
        sendBatch(to: leader, now: now)
    }

    func sendBatch(to leader: NodeID, now: ContinuousClock.Instant) {
        let deadline = now + .milliseconds(Int64(config.forwardReplyTimeoutSeconds * 1000))
        guard let batch = requests.forwarding.nextBatch(to: leader, now: now, deadline: deadline, maxWrites: Self.maxForwardBatchWrites,
                                                        maxBytes: Self.maxForwardBatchBytes, size: { $0.payload.count })
        else { return }
        transport.send(.forwardBatch(ForwardBatch(from: node.id, batchID: batch.id, payloads: batch.writes.map(\.payload))), to: leader)
    }

    /// Most queued writes one proposal takes (a turn proposes the rest in further proposals).
    static let maxProposalBatch = 1_024

    /// The turn's writes, in proposals of their own: the first holds the followers' batches that
    /// came in during the turn, then the head of our queue; the rest of a longer queue follows in
    /// further proposals. A refused proposal (not leading, a leadership transfer under way) stops
    /// the run and keeps what is left of our queue for the next turn.
    func proposeTurn() {
        var batches = requests.heldBatches
        requests.heldBatches = []
        while !batches.isEmpty || !requests.forwarding.isEmpty {
            let accepted = propose(batches)
            batches = []
            if !accepted { break }
        }
    }

    /// One proposal: `batches` (followers' writes) and up to `maxProposalBatch` writes of our
    /// queue, in one step, so each follower gets one AppendEntries (within the message limits)
    /// for all of them. Each batch is answered in its own frame; a write that fails its check is
    /// refused alone. Refused: the batches are bounced and our writes go back to the queue's head.
    private func propose(_ batches: [ForwardBatch]) -> Bool {
        var stamped: [[UInt8]] = []
        var decoded: [EmberStorage.LogEntry] = []  // of the followers' writes, decoded for their check
        var slots: [(batch: Int, write: Int)] = []
        var results: [[ForwardResult?]] = batches.map { Array(repeating: nil, count: $0.payloads.count) }
        for (b, batch) in batches.enumerated() {
            for (k, payload) in batch.payloads.enumerated() {
                do {
                    let (bytes, entry) = try checkedStamp(payload)
                    stamped.append(bytes)
                    decoded.append(entry)
                } catch {
                    results[b][k] = .refused("invalid write: \(error)")
                    continue
                }
                slots.append((b, k))
            }
        }
        let (own, ownStamped, ownEntries) = takeQueued()
        stamped += ownStamped
        var accepted: [(UInt64, UInt64)] = []
        var hint = node.leaderID
        if !stamped.isEmpty {
            let outcomes = step(.proposeBatch(stamped))
            accepted = outcomes.acceptedProposals
            assert(accepted.isEmpty || accepted.count == stamped.count, "a batch is proposed whole or not at all")
            hint = outcomes.rejectionHint
        }
        let refused = !stamped.isEmpty && accepted.isEmpty
        for (n, slot) in slots.enumerated() {
            results[slot.batch][slot.write] = refused ? .notLeader(hint: hint) : .accepted(index: accepted[n].0, term: accepted[n].1)
        }
        for (batch, answers) in zip(batches, results) {
            transport.send(.forwardBatchReply(ForwardBatchReply(from: node.id, batchID: batch.batchID,
                                                                results: answers.map { $0! })), to: batch.from)
        }
        if refused {
            requests.forwarding.requeueFront(own)
            return false
        }
        // The followers' writes come first in the proposal, one decoded entry per slot.
        for (entry, (index, term)) in zip(decoded, accepted) { self.decoded.remember(entry, index: index, term: term) }
        for (k, (w, (index, term))) in zip(own, accepted[slots.count...]).enumerated() {
            if let entry = ownEntries[k] { self.decoded.remember(entry, index: index, term: term) }
            requests.awaitApply(index: index, term: term, w, appliedIndex: answerFloor)
        }
        return true
    }

    /// Up to `maxProposalBatch` writes from the head of our queue, with their stamped entries
    /// (a write whose entry cannot be stamped is refused here) and, for those built on this
    /// node, the storage entries they encode with their stamped timestamps: the turn's write
    /// appends those without decoding the bytes (`DecodedEntries`; a bulk import's MBs).
    func takeQueued() -> (writes: [PendingWrite], stamped: [[UInt8]], entries: [EmberStorage.LogEntry?]) {
        var writes: [PendingWrite] = []
        var stamped: [[UInt8]] = []
        var entries: [EmberStorage.LogEntry?] = []
        while writes.count < Self.maxProposalBatch, let w = requests.forwarding.first {
            requests.forwarding.removeFirst()
            // Validated by the front already (ReplicatedDataStore.write).
            do { stamped.append(try stamp(w.payload, validate: false)) } catch {
                w.reply.resume(throwing: ClusterError.refused("invalid write: \(error)"))
                continue
            }
            entries.append(w.entry.map { e in
                var e = e
                e.timestamp = lastStamp  // what `stamp` wrote into the bytes
                return e
            })
            writes.append(w)
        }
        return (writes, stamped, entries)
    }

    /// A follower's batch that reached us while not leading: every write is bounced, naming the
    /// leader we know of, and the follower resends them there, in order.
    func bounce(_ batch: ForwardBatch) {
        let bounced = ForwardResult.notLeader(hint: node.leaderID)
        transport.send(.forwardBatchReply(ForwardBatchReply(from: node.id, batchID: batch.batchID,
                                                            results: Array(repeating: bounced, count: batch.payloads.count))), to: batch.from)
    }

    /// The leader answered our batch: accepted writes wait for their apply here (read-your-
    /// writes), refused ones fail, bounced ones are back at the head of the queue (ForwardQueue)
    /// and go to the leader the answer named, or wait a tick for Raft to learn one.
    func batchAnswered(_ reply: ForwardBatchReply, now: ContinuousClock.Instant) {
        guard let answer = requests.forwarding.answered(batch: reply.batchID, from: reply.from, results: reply.results) else {
            return  // timed out already
        }
        for a in answer.accepted { requests.awaitApply(index: a.index, term: a.term, a.write, appliedIndex: answerFloor) }
        requests.batchSettled()
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
