// Leader election: safety, vote restrictions, PreVote and CheckQuorum.

@testable import EmberRaft
import Testing

@Suite struct ElectionTests {
    @Test func electsExactlyOneLeaderByTimeout() {
        var c = TestCluster(3)
        c.tickAll(30)
        #expect(c.leaders.count == 1)
        let leader = c.leaders[0]
        // Everyone agrees on the leader and the term.
        for id in c.ids {
            #expect(c[id].leaderID == leader)
            #expect(c[id].term == c[leader].term)
        }
    }

    @Test func atMostOneLeaderPerTermUnderSplitVotes() {
        // Several simultaneous candidates without PreVote: votes split, terms advance, and each
        // term still has at most one leader.
        var c = TestCluster(5, config: TestCluster.config { $0.preVote = false })
        var leaderOfTerm: [UInt64: NodeID] = [:]
        // Everyone campaigns at once: the first term's votes split.
        for id in c.ids { c.step(id, .campaign) }
        for _ in 0..<150 {
            c.tickAll(1)
            for id in c.leaders {
                if let prior = leaderOfTerm[c[id].term] { #expect(prior == id) }
                leaderOfTerm[c[id].term] = id
            }
        }
        #expect(!leaderOfTerm.isEmpty)
    }

    @Test func votesOnlyForUpToDateLogs() {
        // n1's log ends at term 1, n2 and n3 at term 2: n1 cannot win, n2 can.
        let voters = ["n1", "n2", "n3"]
        var c = TestCluster(states: [
            "n1": persisted(voters: voters, terms: [1, 1, 1, 1], currentTerm: 2),
            "n2": persisted(voters: voters, terms: [1, 2], currentTerm: 2),
            "n3": persisted(voters: voters, terms: [1, 2], currentTerm: 2),
        ], config: TestCluster.config { $0.preVote = false })
        c.step("n1", .campaign)
        let requests = c.queue
        c.deliverAll()
        #expect(c["n1"].role != .leader)
        #expect(requests.count == 2)
        #expect(c["n2"].votedFor == nil && c["n3"].votedFor == nil)
        // Longer log but older last term loses; newer last term wins.
        c.step("n2", .campaign)
        c.deliverAll()
        #expect(c["n2"].role == .leader)
    }

    @Test func grantsAtMostOneVotePerTerm() {
        var c = TestCluster(3, config: TestCluster.config { $0.preVote = false; $0.checkQuorum = false })
        c.step("n1", .campaign)
        c.step("n2", .campaign)  // same term 1 as n1
        let msgs = c.takeQueue()
        // n3 sees n1's request first and must then reject n2's.
        let toN3 = msgs.filter { $0.to == "n3" }
        var n3Responses: [Bool] = []
        for m in toN3 {
            for r in c.step("n3", .receive(m)).messages {
                if case .requestVoteResponse(let g) = r.payload { n3Responses.append(g) }
            }
        }
        #expect(n3Responses == [true, false])
        #expect(c["n3"].votedFor == toN3[0].from)
    }

    @Test func preVotePreventsPartitionedNodeFromBumpingTerms() {
        var c = TestCluster(3)
        c.elect("n1")
        let term = c["n1"].term
        c.isolate("n3")
        c.tickAll(100)  // n3 keeps timing out but its pre-votes go nowhere
        #expect(c["n3"].term == term)
        #expect(c["n3"].role == .preCandidate)
        c.heal()
        c.tickAll(5)
        // Rejoining does not disrupt the leader or the term.
        #expect(c["n1"].role == .leader)
        #expect(c["n1"].term == term)
        #expect(c["n3"].leaderID == "n1")
    }

    @Test func withoutPreVoteARejoiningNodeDisruptsTheTerm() {
        // The contrast case for the test above: plain Raft bumps terms.
        var c = TestCluster(3, config: TestCluster.config { $0.preVote = false; $0.checkQuorum = false })
        c.elect("n1")
        let term = c["n1"].term
        c.isolate("n3")
        c.tickAll(50)
        #expect(c["n3"].term > term)
    }

    @Test func preVoteIsNotGrantedWhileLeaderIsAlive() {
        var c = TestCluster(3)
        c.elect("n1")
        // n2's pre-vote reaches n3, which heard from n1 recently: rejected (ignored) by lease.
        c.step("n2", .campaign)
        c.deliverAll()
        #expect(c["n1"].role == .leader)
        #expect(c["n2"].role != .leader)
        #expect(c.ids.allSatisfy { c[$0].term == c["n1"].term })
    }

    @Test func checkQuorumMakesPartitionedLeaderStepDown() {
        var c = TestCluster(3)
        c.elect("n1")
        c.isolate("n1")
        for _ in 0..<(2 * 10 + 1) { c.tick("n1"); c.deliverAll() }
        #expect(c["n1"].role == .follower)
        // The majority side elects a new leader meanwhile.
        c.tickAll(40)
        #expect(c.leaders.count == 1 && c.leaders[0] != "n1")
    }

    @Test func leaderWithoutCheckQuorumStaysLeaderWhenPartitioned() {
        var c = TestCluster(3, config: TestCluster.config { $0.checkQuorum = false })
        c.elect("n1")
        c.isolate("n1")
        for _ in 0..<50 { c.tick("n1"); c.deliverAll() }
        #expect(c["n1"].role == .leader)
    }

    @Test func staleLeaderStepsDownOnHearingNewerTerm() {
        var c = TestCluster(3)
        c.elect("n1")
        c.isolate("n1")
        c.tickAll(40)  // n1 steps down by check-quorum; n2 or n3 leads a newer term
        c.heal()
        c.tickAll(5)
        #expect(c.leaders.count == 1)
        let leader = c.leaders[0]
        #expect(c.ids.allSatisfy { c[$0].term == c[leader].term })
    }

    @Test func newLeaderAppendsNoop() {
        var c = TestCluster(3)
        c.elect("n2")
        let last = c["n2"].log.entry(at: c["n2"].log.lastIndex)!
        #expect(last.kind == .noop && last.term == c["n2"].term)
        #expect(c["n2"].commitIndex == last.index)  // committed after one round
    }
}
