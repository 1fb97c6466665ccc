import EmberRaft
import Synchronization

/// Heartbeat answers for a follower whose Raft loop is held in a storage write.
///
/// The loop performs a turn's write before it reads its next input, so a follower whose syncs are
/// slow (or whose append waits on the writer behind an apply it queued on its own) answered no
/// heartbeat for as long: two syncs at 300 ms each outlast an election timeout, and with both
/// followers so the leader fails its check-quorum. Raft's host contract lets a heartbeat answer
/// precede durability (it echoes the leader's read round and claims nothing stored: Action.swift,
/// 2.), so the transport's handler answers for the loop while it is held: only a heartbeat from
/// the leader the loop last followed, in that term, and only once the write has been out for
/// `answerAfter` (a normal write is a few ms: nothing changes then).
///
/// Safety of the read rounds it echoes: the view is set before the write starts, after the turn's
/// steps; a vote for a newer term is sent only after its hard state is durable, which is after
/// the view was replaced. An answer given from the older view is therefore given before the vote
/// could have counted anywhere, as if the heartbeat had arrived a moment earlier.
///
/// The loop still takes every heartbeat (its commit index, the election timer) and its own
/// answer to one already answered here is dropped (`owes`), so the leader does not count a
/// heartbeat round twice (a round without progress restarts a follower's pipeline).
final class StalledLoopHeartbeats: Sendable {
    /// How long a write must have been out before the handler answers: well under an election
    /// timeout (10 ticks of 50 ms by default) and above a normal write.
    static let answerAfter = Duration.milliseconds(100)
    /// Loop answers owed to one peer at most (a heartbeat every 100 ms: 100 s of a held loop);
    /// past it the extra answers go out twice, which costs the leader a pipeline restart at worst.
    static let maxOwed = 1_024

    struct View: Equatable {
        var term: UInt64
        var leader: NodeID
        var since: ContinuousClock.Instant
    }

    private struct State {
        var held: View?
        /// The term `owed` counts answers for: another term starts over.
        var term: UInt64 = 0
        var owed: [NodeID: Int] = [:]
    }

    private let state = Mutex(State())

    /// The loop starts a write as a follower (or learner) of `leader` in `term`.
    func writeStarted(term: UInt64, leader: NodeID?, now: ContinuousClock.Instant) {
        state.withLock { s in
            if s.term != term { s.term = term; s.owed = [:] }
            s.held = leader.map { View(term: term, leader: $0, since: now) }
        }
    }

    /// The write is durable (or failed): the loop answers again.
    func writeEnded() {
        state.withLock { $0.held = nil }
    }

    /// The transport's handler: the answer to send for `m` now, if the loop is held past
    /// `answerAfter` as a follower of `m`'s sender in `m`'s term; nil otherwise.
    func answer(_ m: Message, selfID: NodeID, now: ContinuousClock.Instant) -> Message? {
        guard m.to == selfID, case .heartbeat(_, let context) = m.payload else { return nil }
        return state.withLock { s -> Message? in
            guard let view = s.held, view.term == m.term, view.leader == m.from, now - view.since >= Self.answerAfter
            else { return nil }
            let owed = s.owed[m.from, default: 0]
            if owed < Self.maxOwed { s.owed[m.from] = owed + 1 }
            return Message(from: selfID, to: m.from, term: view.term, payload: .heartbeatResponse(readContext: context))
        }
    }

    /// The loop's own heartbeat answer to `peer` in `term`: false when the handler answered it
    /// already (the heartbeats reach the loop in the order they were answered).
    func shouldSend(to peer: NodeID, term: UInt64) -> Bool {
        state.withLock { s in
            guard s.term == term, let owed = s.owed[peer], owed > 0 else { return true }
            s.owed[peer] = owed == 1 ? nil : owed - 1
            return false
        }
    }
}
