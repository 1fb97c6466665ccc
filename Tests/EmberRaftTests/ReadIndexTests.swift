// Linearizable reads via ReadIndex (thesis 6.4).

@testable import EmberRaft
import Testing

private func readReady(_ actions: [Action]) -> [(UInt64, UInt64)] {
    actions.compactMap { if case .readReady(let id, let idx) = $0 { return (id, idx) } else { return nil } }
}

@Suite struct ReadIndexTests {
    @Test func leaderConfirmsWithHeartbeatQuorumBeforeReleasing() {
        var c = TestCluster(3)
        c.elect("n1")
        c.propose("n1", "w")
        c.deliverAll()
        let actions = c.step("n1", .readIndex(id: 7))
        #expect(readReady(actions).isEmpty)  // not before a quorum round
        #expect(actions.messages.filter { if case .heartbeat = $0.payload { return true } else { return false } }.count == 2)
        c.deliverAll()
        let ready = (c.events["n1"] ?? []).filter { if case .readReady = $0 { return true } else { return false } }
        #expect(ready == [.readReady(id: 7, index: c["n1"].commitIndex)])
    }

    @Test func partitionedLeaderCannotServeReads() {
        var c = TestCluster(3)
        c.elect("n1")
        c.isolate("n1")
        c.step("n1", .readIndex(id: 1))
        c.deliverAll()
        #expect(!(c.events["n1"] ?? []).contains(.readReady(id: 1, index: c["n1"].commitIndex)))
        // Check-quorum eventually deposes it and the read fails explicitly.
        for _ in 0..<25 { c.tick("n1"); c.deliverAll() }
        #expect((c.events["n1"] ?? []).contains(.readFailed(id: 1)))
    }

    @Test func readWaitsForLeaderToCommitInItsTerm() {
        var c = TestCluster(3)
        c.step("n1", .campaign)
        c.deliverAll { m in
            switch m.payload {
            case .preVote, .preVoteResponse, .requestVote, .requestVoteResponse: return true
            default: return false
            }
        }
        #expect(c["n1"].role == .leader)
        c.step("n1", .readIndex(id: 3))
        #expect(c.queue.allSatisfy { if case .heartbeat = $0.payload { return false } else { return true } })
        // Once the no-op commits, the read is processed with the new commit index.
        c.tickAll(3)
        let ready = (c.events["n1"] ?? []).compactMap { if case .readReady(3, let idx) = $0 { return idx } else { return nil } }
        #expect(ready.count == 1)
        #expect(ready.first! >= 1)
    }

    @Test func followerForwardsReadAndWaitsForApply() {
        var c = TestCluster(3)
        c.elect("n1")
        c.propose("n1", "x")
        // Deliver only to n2 so n3 is behind when it asks.
        c.deliverAll { $0.to != "n3" && $0.from != "n3" }
        let readIndexTarget = c["n1"].commitIndex
        #expect(c["n3"].appliedIndex < readIndexTarget)
        let a = c.step("n3", .readIndex(id: 11))
        #expect(a.messages.first?.payload == .readIndexRequest(id: 11))
        c.deliverAll()
        c.tickAll(2)
        let ready = (c.events["n3"] ?? []).compactMap { if case .readReady(11, let idx) = $0 { return idx } else { return nil } }
        #expect(ready == [readIndexTarget])
        #expect(c["n3"].appliedIndex >= readIndexTarget)
        #expect(c.payloads("n3") == ["x"])
    }

    @Test func followerWithoutLeaderFailsReadImmediately() {
        var c = TestCluster(3)
        #expect(c.step("n2", .readIndex(id: 5)) == [.readFailed(id: 5)])
    }

    @Test func singleNodeClusterServesReadsImmediately() {
        var c = TestCluster(1)
        c.step("n1", .campaign)
        #expect(c["n1"].role == .leader)
        let actions = c.step("n1", .readIndex(id: 1))
        #expect(readReady(actions).map(\.0) == [1])
    }
}
