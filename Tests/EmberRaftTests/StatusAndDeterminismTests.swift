// Status reporting, randomized timeouts and determinism.

@testable import EmberRaft
import Testing

@Suite struct StatusAndDeterminismTests {
    @Test func leaderStatusReportsPeerProgress() {
        var c = TestCluster(3)
        c.elect("n1")
        c.propose("n1", "x")
        c.deliverAll()
        let s = c["n1"].status
        #expect(s.role == .leader && s.leaderID == "n1" && s.term == c["n1"].term)
        #expect(s.commitIndex == 2 && s.appliedIndex == 2 && s.lastIndex == 2)
        #expect(Set(s.progress.keys) == ["n2", "n3"])
        for (_, p) in s.progress {
            #expect(p.matchIndex == 2 && p.nextIndex == 3 && p.state == .replicate)
        }
        let f = c["n2"].status
        #expect(f.role == .follower && f.leaderID == "n1" && f.progress.isEmpty)
    }

    @Test func electionTimeoutIsRandomizedWithinRange() {
        var seen = Set<Int>()
        for seed in UInt64(0)..<50 {
            let n = RaftNode(id: "n1", config: RaftConfig(electionTick: 10, heartbeatTick: 1, randomSeed: seed), state: .bootstrap(voters: ["n1", "n2", "n3"]))
            #expect(n.randomizedElectionTimeout >= 10 && n.randomizedElectionTimeout < 20)
            seen.insert(n.randomizedElectionTimeout)
        }
        #expect(seen.count > 3)
    }

    @Test func identicalInputsGiveIdenticalOutputs() {
        func run() -> [[Action]] {
            var c = TestCluster(3)
            c.tickAll(30)
            if let l = c.leaders.first { for i in 0..<5 { c.propose(l, "d\(i)") } }
            c.tickAll(5)
            return c.stepLog
        }
        #expect(run() == run())
    }

    @Test func splitMixIsStable() {
        var r = SplitMix64(seed: 1)
        // Reference values of SplitMix64 for seed 1.
        #expect(r.next() == 0x910A_2DEC_8902_5CC1)
        #expect(r.next() == 0xBEEB_8DA1_658E_EC67)
    }
}
