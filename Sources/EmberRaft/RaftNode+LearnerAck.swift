// A learner's answers to appends, taken together (issue 38): nothing waits on them (a learner
// counts toward no quorum), the leader needs them only for flow control, promotion readiness
// and retransmission, and each one costs the learner a message and the leader a receive and a
// turn. A learner answers an append at once only once `RaftConfig.learnerAckMinEntries`
// entries are unanswered; smaller ones wait for a later answer, its next tick or the leader's
// next heartbeat. The leader keeps several small appends in flight to a learner meanwhile
// (`window(of:)`), so what commits still goes at once.

/// A successful answer to the leader of `term` not sent yet, through `index`, covering `entries`
/// entries appended since the last answer.
struct DeferredAck: Sendable, Hashable {
    var leader: NodeID
    var term: UInt64
    var index: UInt64
    var entries: Int
}

extension RaftNode {
    /// Follower: answers a successful append through `index` that carried `entries` entries, now
    /// or (a learner's small appends) later, together with the next.
    mutating func acknowledgeAppend(to leader: NodeID, index: UInt64, entries: Int) {
        var index = index, unanswered = entries
        if let d = deferredAck, d.leader == leader, d.term == term {
            index = max(index, d.index)
            unanswered += d.entries
        }
        deferredAck = nil
        // An append without entries (a probe, or entries we hold committed already) is answered
        // at once: a probing leader sends nothing more until it hears back.
        if isLearner && entries > 0 && unanswered < config.learnerAckMinEntries {
            deferredAck = DeferredAck(leader: leader, term: term, index: index, entries: unanswered)
            return
        }
        send(leader, .appendEntriesResponse(AppendEntriesResponse(success: true, index: index)))
    }

    /// Sends the answer held back, if it is still for our leader and term (a new leader probes
    /// anyway): on each tick (time comes only as ticks), before a heartbeat's answer (the leader
    /// restarts a pipeline that showed no progress over a heartbeat round) and before a
    /// rejection.
    mutating func flushDeferredAck() {
        guard let d = deferredAck else { return }
        deferredAck = nil
        guard d.term == term, d.leader == leaderID, role == .follower else { return }
        send(d.leader, .appendEntriesResponse(AppendEntriesResponse(success: true, index: d.index)))
    }
}
