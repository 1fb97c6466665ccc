import EmberRaft
import Testing

@testable import EmberCluster

/// The transport handler's heartbeat answers while a follower's loop is held in a write: only to
/// its leader, in its term, after `answerAfter`; the loop's own answer to one answered is dropped.
@Suite struct StalledLoopHeartbeatsTests {
    static let t0 = ContinuousClock.now
    static let late = t0 + StalledLoopHeartbeats.answerAfter

    static func heartbeat(from: NodeID = "n1", term: UInt64 = 3, context: UInt64 = 7) -> Message {
        Message(from: from, to: "n2", term: term, payload: .heartbeat(commit: 10, readContext: context))
    }

    @Test func answersItsLeadersHeartbeatOnlyWhileHeldPastTheDelay() {
        let h = StalledLoopHeartbeats()
        #expect(h.answer(Self.heartbeat(), selfID: "n2", now: Self.late) == nil)  // no write out
        h.writeStarted(term: 3, leader: "n1", now: Self.t0)
        #expect(h.answer(Self.heartbeat(), selfID: "n2", now: Self.t0 + .milliseconds(10)) == nil)  // a normal write
        let answer = h.answer(Self.heartbeat(context: 9), selfID: "n2", now: Self.late)
        #expect(answer == Message(from: "n2", to: "n1", term: 3, payload: .heartbeatResponse(readContext: 9)))
        #expect(h.answer(Self.heartbeat(from: "n3"), selfID: "n2", now: Self.late) == nil)  // not its leader
        #expect(h.answer(Self.heartbeat(term: 4), selfID: "n2", now: Self.late) == nil)  // a newer term: the loop's
        let append = Message(from: "n1", to: "n2", term: 3, payload: .appendEntries(AppendEntries(prevIndex: 1, prevTerm: 1, entries: [], commit: 1)))
        #expect(h.answer(append, selfID: "n2", now: Self.late) == nil)
        h.writeEnded()
        #expect(h.answer(Self.heartbeat(), selfID: "n2", now: Self.late + .seconds(1)) == nil)
    }

    @Test func aFollowerWithoutALeaderAnswersNothing() {
        let h = StalledLoopHeartbeats()
        h.writeStarted(term: 4, leader: nil, now: Self.t0)  // a candidate's vote, or no leader known
        #expect(h.answer(Self.heartbeat(term: 4), selfID: "n2", now: Self.late) == nil)
    }

    @Test func theLoopsOwnAnswersToAnsweredHeartbeatsAreDropped() {
        let h = StalledLoopHeartbeats()
        h.writeStarted(term: 3, leader: "n1", now: Self.t0)
        #expect(h.answer(Self.heartbeat(context: 1), selfID: "n2", now: Self.late) != nil)
        #expect(h.answer(Self.heartbeat(context: 2), selfID: "n2", now: Self.late) != nil)
        h.writeEnded()
        // The loop takes both heartbeats: its two answers are owed, the third goes out.
        #expect(h.shouldSend(to: "n1", term: 3) == false)
        #expect(h.shouldSend(to: "n1", term: 3) == false)
        #expect(h.shouldSend(to: "n1", term: 3) == true)
        #expect(h.shouldSend(to: "n3", term: 3) == true)
    }

    @Test func aNewTermForgetsWhatWasOwed() {
        let h = StalledLoopHeartbeats()
        h.writeStarted(term: 3, leader: "n1", now: Self.t0)
        #expect(h.answer(Self.heartbeat(), selfID: "n2", now: Self.late) != nil)
        h.writeEnded()
        #expect(h.shouldSend(to: "n1", term: 4) == true)  // an answer in another term is the loop's
        h.writeStarted(term: 4, leader: "n3", now: Self.late)
        h.writeEnded()
        #expect(h.shouldSend(to: "n1", term: 3) == true)
    }
}
