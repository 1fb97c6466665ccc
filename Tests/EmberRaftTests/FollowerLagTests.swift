// The leader's view of follower lag (issue 16): a follower behind the commit index whose match
// index does not advance counts stalled ticks, which hosts export so a stuck follower is visible.

@testable import EmberRaft
import Testing

@Suite struct FollowerLagTests {
    @Test func cutOffFollowerCountsStalledTicksAndRecovers() {
        var c = TestCluster(3)
        c.elect("n1")
        c.isolate("n3")
        for i in 0..<3 { c.propose("n1", "w\(i)") }
        c.deliverAll()
        for _ in 0..<6 { c.tickAll(1) }
        let commit = c["n1"].commitIndex
        let n3 = c["n1"].status.progress["n3"]!
        #expect(n3.lag(commitIndex: commit) >= 3)
        #expect(n3.lagStalledTicks >= 5)
        // The connected follower keeps up: no lag, nothing stalled.
        let n2 = c["n1"].status.progress["n2"]!
        #expect(n2.lag(commitIndex: commit) == 0 && n2.lagStalledTicks == 0)
        // Healed, n3 catches up and the count resets.
        c.heal()
        for _ in 0..<4 { c.tickAll(1) }
        let after = c["n1"].status.progress["n3"]!
        #expect(after.lag(commitIndex: c["n1"].commitIndex) == 0)
        #expect(after.lagStalledTicks == 0)
    }

    @Test func followerThatKeepsCatchingUpIsNotStalled() {
        var c = TestCluster(3)
        c.elect("n1")
        c.isolate("n3")
        for i in 0..<20 { c.propose("n1", "w\(i)") }
        c.deliverAll()
        c.heal()
        // Each round n3 receives what it missed: behind at times, but never stalled.
        for i in 0..<5 {
            c.propose("n1", "more\(i)")
            c.tickAll(1)
            #expect(c["n1"].status.progress["n3"]!.lagStalledTicks <= 1)
        }
    }

    /// A status read between an acknowledgement and the next tick showed `lag 0` with stalled
    /// time left from the tick before (an integration test caught it on a fast machine).
    @Test func anAcknowledgementThatAdvancesEndsTheStallAtOnce() {
        var p = PeerProgress(nextIndex: 1)
        _ = p.acknowledge(3)
        for _ in 0..<3 { p.observeTick(commitIndex: 5) }
        #expect(p.lag(commitIndex: 5) == 2 && p.lagStalledTicks == 2)
        let advanced = p.acknowledge(4)
        #expect(advanced && p.lagStalledTicks == 0)
        p.observeTick(commitIndex: 5)
        p.observeTick(commitIndex: 5)
        #expect(p.lagStalledTicks == 1)
        let caughtUp = p.acknowledge(5)
        #expect(caughtUp && p.lag(commitIndex: 5) == 0 && p.lagStalledTicks == 0)
        // An acknowledgement that does not advance reports so.
        let again = p.acknowledge(5)
        #expect(!again)
    }
}
