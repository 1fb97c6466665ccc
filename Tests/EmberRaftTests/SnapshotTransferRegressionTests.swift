// Regressions from the simulator's liveness failures (issue 16: 3-node seed 327, 5-node seeds
// 1003532, 1005221, 1009202). All four had one cause: a late duplicate chunk of a snapshot the
// follower had already installed discarded the transfer of a newer snapshot it was assembling;
// the leader had recorded a higher acknowledged offset than the follower then held, resent from
// there forever, and ignored every answer naming the lower offset. A stale "done" for the old
// snapshot also moved the leader out of snapshot state and restarted the transfer. The follower
// stayed behind the leader's commit index for good.

@testable import EmberRaft
import Testing

private func chunkRequests(_ actions: [Action]) -> [SnapshotChunkRequest] {
    actions.compactMap { if case .sendSnapshotChunk(let r) = $0 { return r } else { return nil } }
}

private func staged(_ actions: [Action]) -> [SnapshotChunk] {
    actions.compactMap { if case .stageSnapshotChunk(let c) = $0 { return c } else { return nil } }
}

private func installs(_ actions: [Action]) -> Bool {
    actions.contains { if case .restoreSnapshot = $0 { return true } else { return false } }
}

/// A follower n3 (term 1, n1 leads) whose log holds indexes 1...3, all committed.
private func follower() -> RaftNode {
    var s = persisted(voters: ["n1", "n2", "n3"], terms: [1, 1, 1])
    s.hardState.commit = 3
    return RaftNode(id: "n3", config: TestCluster.config(), state: s, appliedIndex: 3)
}

private func chunk(_ index: UInt64, offset: Int, total: Int, size: Int = 4) -> Message {
    let meta = SnapshotMetadata(index: index, term: 1, membership: Membership(voters: ["n1", "n2", "n3"]))
    let c = SnapshotChunk(metadata: meta, offset: offset, totalSize: total, data: Array(repeating: 9, count: size),
                          done: offset + size == total)
    return Message(from: "n1", to: "n3", term: 1, payload: .installSnapshot(c))
}

@Suite struct SnapshotTransferRegressionTests {
    @Test func lateChunkOfAnInstalledSnapshotKeepsTheNewerTransfer() {
        var n = follower()
        // Assembling snapshot 20 (8 bytes): the first half arrives.
        #expect(staged(n.step(.receive(chunk(20, offset: 0, total: 8)))).count == 1)
        // A late duplicate of the last chunk of snapshot 2 (covered by our commit index) arrives.
        let stale = n.step(.receive(chunk(2, offset: 4, total: 8)))
        #expect(stale.messages.map(\.payload) == [.installSnapshotResponse(snapshotIndex: 2, receivedBytes: 8, done: true)])
        // The second half of snapshot 20 still completes it (before the fix: "received 0").
        let rest = n.step(.receive(chunk(20, offset: 4, total: 8)))
        #expect(staged(rest).map(\.offset) == [4])
        #expect(installs(rest))
        #expect(n.commitIndex == 20 && n.log.snapshotIndex == 20)
    }

    @Test func leaderResendsFromTheFollowersLowerOffsetAfterAStall() {
        var c = TestCluster(3, config: TestCluster.config {
            $0.snapshotChunkSize = 4
            $0.maxInflightSnapshotChunks = 2
        })
        c.elect("n1")
        c.isolate("n3")
        for i in 0..<10 { c.propose("n1", "s\(i)") }
        c.deliverAll()
        c.step("n1", .compact(index: c["n1"].appliedIndex))
        c.heal()
        c.tickAll(2)
        #expect(c["n1"].status.progress["n3"]?.state == .snapshot)
        let image: [UInt8] = Array(0..<24)
        #expect(chunkRequests(c.provideImage("n1", image)).map(\.offset) == [0, 4])
        _ = c.takeQueue()
        let index = c.images["n1"]!.index
        let term = c["n1"].term
        func answer(_ received: Int) -> [Action] {
            c.step("n1", .receive(Message(from: "n3", to: "n1", term: term,
                                          payload: .installSnapshotResponse(snapshotIndex: index, receivedBytes: received, done: false))))
        }
        // n3 acknowledges 12 bytes, then (having lost its partial transfer and restarted it from
        // a late first chunk) says it holds 4.
        _ = answer(8)
        _ = answer(12)
        #expect(c["n1"].progress["n3"]?.snapshotOffset == 12)
        _ = answer(4)
        // Two heartbeat rounds without progress: the leader resends from what n3 holds now.
        var resent: [Int] = []
        for _ in 0..<2 {
            for a in c.step("n1", .receive(Message(from: "n3", to: "n1", term: term, payload: .heartbeatResponse(readContext: 0)))) {
                if case .sendSnapshotChunk(let r) = a { resent.append(r.offset) }
            }
        }
        #expect(resent.first == 4, "resent \(resent)")
        #expect(c["n1"].progress["n3"]?.snapshotOffset == 4)
    }

    @Test func staleDoneForAnOlderSnapshotDoesNotRestartTheTransfer() {
        var c = TestCluster(3, config: TestCluster.config { $0.snapshotChunkSize = 4 })
        c.elect("n1")
        c.isolate("n3")
        for i in 0..<10 { c.propose("n1", "s\(i)") }
        c.deliverAll()
        c.step("n1", .compact(index: c["n1"].appliedIndex))
        c.heal()
        c.tickAll(2)
        c.provideImage("n1", Array(0..<16))
        _ = c.takeQueue()
        let index = c.images["n1"]!.index
        let term = c["n1"].term
        c.step("n1", .receive(Message(from: "n3", to: "n1", term: term,
                                      payload: .installSnapshotResponse(snapshotIndex: index, receivedBytes: 8, done: false))))
        // A late "done" for an older snapshot n3 installed earlier.
        let actions = c.step("n1", .receive(Message(from: "n3", to: "n1", term: term,
                                                    payload: .installSnapshotResponse(snapshotIndex: 1, receivedBytes: 16, done: true))))
        let pr = c["n1"].progress["n3"]!
        #expect(pr.state == .snapshot && pr.snapshotIndex == index && pr.snapshotOffset == 8)
        #expect(!chunkRequests(actions).contains { $0.offset == 0 })
    }
}
