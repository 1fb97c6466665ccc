import Testing

@testable import EmberCluster

/// `--learner-nice` (issue 38 (c)): the process is niced when the node becomes a learner and
/// goes back when it stops being one, once per change; off, nothing is ever set.
@Suite struct LearnerPriorityTests {
    final class Calls: @unchecked Sendable { var values: [Int32] = [] }

    @Test func followsTheRoleOncePerChange() {
        let calls = Calls()
        var p = LearnerPriority(nice: 19, original: 0) { calls.values.append($0); return true }
        #expect(p.update(learner: false) == nil)  // joining: not a learner yet
        #expect(calls.values.isEmpty)
        #expect(p.update(learner: true) == nil)
        #expect(p.update(learner: true) == nil)
        #expect(calls.values == [19])
        #expect(p.update(learner: false) == nil)  // promoted
        #expect(calls.values == [19, 0])
    }

    /// Threads a pool starts later may not inherit the niceness: it is set again every
    /// `reassertTicks` ticks while a learner, never otherwise.
    @Test func reassertsWhileALearner() {
        let calls = Calls()
        var p = LearnerPriority(nice: 19, original: 0, reassertTicks: 3) { calls.values.append($0); return true }
        for _ in 0..<6 { p.tick() }
        #expect(calls.values.isEmpty)
        _ = p.update(learner: true)
        for _ in 0..<7 { p.tick() }
        #expect(calls.values == [19, 19, 19])
        _ = p.update(learner: false)
        for _ in 0..<6 { p.tick() }
        #expect(calls.values == [19, 19, 19, 0])
    }

    @Test func offSetsNothing() {
        let calls = Calls()
        var p = LearnerPriority(nice: 0, original: 0) { calls.values.append($0); return true }
        _ = p.update(learner: true)
        _ = p.update(learner: false)
        #expect(calls.values.isEmpty)
    }

    @Test func neverRaisesAProcessStartedNicerAndWarnsWhenRefused() {
        let calls = Calls()
        var p = LearnerPriority(nice: 5, original: 10) { calls.values.append($0); return $0 >= 10 }
        #expect(p.update(learner: true) == nil)
        #expect(calls.values == [10])
        var refused = LearnerPriority(nice: 19, original: 0) { calls.values.append($0); return $0 == 19 }
        #expect(refused.update(learner: true) == nil)
        #expect(refused.update(learner: false)?.contains("restart") == true)
    }

    /// The real setter on this process: niceness only goes up without privileges, so the test
    /// sets it to what it is (every thread listed, none refused).
    @Test func setsEveryThreadOfTheProcess() {
        #expect(LearnerPriority.setProcessNice(LearnerPriority.currentNice()))
    }
}
