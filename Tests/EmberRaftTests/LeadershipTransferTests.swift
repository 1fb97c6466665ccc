// Leadership transfer via TimeoutNow (thesis 3.10).

@testable import EmberRaft
import Testing

@Suite struct LeadershipTransferTests {
    @Test func transfersToUpToDateFollower() {
        var c = TestCluster(3)
        c.elect("n1")
        let term = c["n1"].term
        c.step("n1", .transferLeadership(to: "n3"))
        c.deliverAll()
        #expect(c["n3"].role == .leader)
        #expect(c["n3"].term == term + 1)
        #expect(c["n1"].role == .follower && c["n1"].leaderID == "n3")
    }

    @Test func catchesUpLaggingTargetBeforeTimeoutNow() {
        var c = TestCluster(3)
        c.elect("n1")
        c.isolate("n3")
        for i in 0..<5 { c.propose("n1", "t\(i)") }
        c.deliverAll()
        c.heal()
        c.step("n1", .transferLeadership(to: "n3"))
        // Proposals are refused while the transfer is in progress.
        #expect(c.propose("n1", "blocked") == [.proposalRejected(.transferInProgress)])
        var sawTimeoutNow = false
        while !c.queue.isEmpty {
            let m = c.queue.removeFirst()
            if case .timeoutNow = m.payload {
                sawTimeoutNow = true
                #expect(c["n3"].log.lastIndex == c["n1"].log.lastIndex)  // target caught up first
            }
            c.step(m.to, .receive(m))
        }
        #expect(sawTimeoutNow)
        #expect(c["n3"].role == .leader)
        #expect(c.payloads("n3").prefix(5) == ["t0", "t1", "t2", "t3", "t4"])
    }

    @Test func transferBypassesLeaderLease() {
        // Voters are in lease (they just heard from n1), but TimeoutNow elections are honoured.
        var c = TestCluster(5)
        c.elect("n1")
        c.tickAll(2)
        c.step("n1", .transferLeadership(to: "n4"))
        c.deliverAll()
        #expect(c.leaders == ["n4"])
    }

    @Test func transferIsAbandonedAfterElectionTimeout() {
        var c = TestCluster(3)
        c.elect("n1")
        c.isolate("n3")
        c.step("n1", .transferLeadership(to: "n3"))
        #expect(c["n1"].status.leadTransferee == "n3")
        for _ in 0..<11 { c.tick("n1"); c.deliverAll() }
        #expect(c["n1"].status.leadTransferee == nil)
        #expect(c["n1"].role == .leader)
        #expect(c.propose("n1", "ok").contains { if case .proposalAccepted = $0 { return true } else { return false } })
    }
}
