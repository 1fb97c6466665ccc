// Log compaction and chunked InstallSnapshot. Raft holds no snapshot bytes: the leader's host
// prepares an image and reads chunks of it on request; the follower's host stages them.

@testable import EmberRaft
import Testing

private func restores(_ c: TestCluster, _ id: NodeID) -> [SnapshotMetadata] {
    (c.events[id] ?? []).compactMap { if case .restoreSnapshot(let s) = $0 { return s } else { return nil } }
}

private func chunkRequests(_ actions: [Action]) -> [SnapshotChunkRequest] {
    actions.compactMap { if case .sendSnapshotChunk(let r) = $0 { return r } else { return nil } }
}

/// A 3-node cluster where n3 missed entries the leader n1 compacted away, so it needs a snapshot.
private func clusterWithLaggingFollower(chunkSize: Int, inflight: Int = 4, entries: Int = 10) -> TestCluster {
    var c = TestCluster(3, config: TestCluster.config {
        $0.snapshotChunkSize = chunkSize
        $0.maxInflightSnapshotChunks = inflight
    })
    c.elect("n1")
    c.isolate("n3")
    for i in 0..<entries { c.propose("n1", "s\(i)") }
    c.deliverAll()
    c.step("n1", .compact(index: c["n1"].appliedIndex))
    c.heal()
    return c
}

@Suite struct SnapshotTests {
    @Test func compactionRecordsOnlyMetadata() {
        var c = TestCluster(3)
        c.elect("n1")
        for i in 0..<5 { c.propose("n1", "e\(i)") }
        c.deliverAll()
        let applied = c["n1"].appliedIndex
        let actions = c.step("n1", .compact(index: applied))
        #expect(c["n1"].log.snapshotIndex == applied)
        #expect(c["n1"].log.entries.isEmpty)
        guard case .persistSnapshot(let meta, let discard)? = actions.first else {
            Issue.record("expected persistSnapshot, got \(actions)")
            return
        }
        #expect(!discard)
        #expect(meta.index == applied && meta.term == c["n1"].term)
        #expect(meta.membership.voters == ["n1", "n2", "n3"])
        // Compaction alone never asks the host for bytes.
        #expect(c.imageRequests["n1"] == nil)
    }

    @Test func laggingFollowerReceivesImageInChunks() {
        var c = clusterWithLaggingFollower(chunkSize: 4)
        // The first heartbeat round shows n3 behind the log start: the leader asks for an image.
        c.tickAll(2)
        #expect(c.imageRequests["n1", default: 0] >= 1)
        #expect(c["n1"].status.progress["n3"]?.state == .snapshot)
        // The host's image may be at its applied index (here beyond the compaction point).
        c.propose("n1", "between")
        c.deliverAll()
        let image: [UInt8] = Array(0..<23)  // 6 chunks of <= 4 bytes
        var chunks: [SnapshotChunk] = []
        let first = c.provideImage("n1", image)
        #expect(chunkRequests(first).count == 4)  // the in-flight window
        for _ in 0..<20 {
            c.deliverAll { m in
                if case .installSnapshot(let chunk) = m.payload { chunks.append(chunk) }
                return true
            }
            c.tickAll(1, deliver: false)
        }
        #expect(chunks.count == 6)
        #expect(chunks.allSatisfy { $0.data.count <= 4 })
        #expect(chunks.map(\.offset) == [0, 4, 8, 12, 16, 20])
        #expect(chunks.last?.done == true)
        // n3 staged exactly the image, installed it once, then caught up with the log after it.
        #expect(c.staged["n3"] == image)
        let restored = restores(c, "n3")
        #expect(restored.count == 1)
        #expect(restored.first?.index == c.images["n1"]?.index)
        #expect(c["n3"].commitIndex == c["n1"].commitIndex)
        c.propose("n1", "after")
        c.deliverAll()
        c.tickAll(2)
        #expect(c["n3"].log.lastIndex == c["n1"].log.lastIndex)
        #expect(c.payloads("n3") == ["after"])
    }

    @Test func inflightChunksAreBoundedAndAcksAdvanceTheWindow() {
        var c = clusterWithLaggingFollower(chunkSize: 2, inflight: 3)
        c.tickAll(2)
        let image: [UInt8] = Array(repeating: 1, count: 20)
        #expect(chunkRequests(c.provideImage("n1", image)).map(\.offset) == [0, 2, 4])
        // Deliver only the first chunk; its ack opens exactly one more slot.
        let q = c.takeQueue()
        let firstChunk = q.first { if case .installSnapshot(let ch) = $0.payload { return ch.offset == 0 } else { return false } }!
        let ack = c.step("n3", .receive(firstChunk)).messages
        #expect(ack.map(\.payload) == [.installSnapshotResponse(snapshotIndex: c.images["n1"]!.index, receivedBytes: 2, done: false)])
        let more = c.step("n1", .receive(ack[0]))
        #expect(chunkRequests(more).map(\.offset) == [6])
        #expect(c["n1"].progress["n3"]?.snapshotOffset == 2)
    }

    @Test func lostChunkIsResentFromTheLastAck() {
        var c = clusterWithLaggingFollower(chunkSize: 3)
        c.tickAll(2)
        let image: [UInt8] = Array(repeating: 7, count: 20)
        c.provideImage("n1", image)
        var dropped = false
        var resentOffsets: [Int] = []
        for _ in 0..<30 {
            c.deliverAll { m in
                guard case .installSnapshot(let ch) = m.payload else { return true }
                if ch.offset == 6 && !dropped { dropped = true; return false }  // lose one chunk once
                if dropped { resentOffsets.append(ch.offset) }
                return true
            }
            c.tickAll(1, deliver: false)
        }
        #expect(dropped)
        #expect(resentOffsets.contains(6))  // went back to the last acknowledged byte
        #expect(c.staged["n3"] == image)
        #expect(restores(c, "n3").count == 1)
        #expect(c["n3"].commitIndex == c["n1"].commitIndex)
    }

    @Test func transferSurvivesRandomLossOfChunksAndAcks() {
        var c = clusterWithLaggingFollower(chunkSize: 3, inflight: 2)
        c.tickAll(2)
        let image: [UInt8] = (0..<50).map { UInt8($0) }
        c.provideImage("n1", image)
        var n = 0
        for _ in 0..<200 {
            c.deliverAll { m in
                switch m.payload {
                case .installSnapshot, .installSnapshotResponse: n += 1; return n % 3 != 0
                default: return true
                }
            }
            c.tickAll(1, deliver: false)
        }
        #expect(c.staged["n3"] == image)
        #expect(restores(c, "n3").count == 1)
        #expect(c["n3"].commitIndex == c["n1"].commitIndex)
    }

    @Test func staleAndDuplicateChunksAreIgnored() {
        var c = clusterWithLaggingFollower(chunkSize: 4)
        c.tickAll(2)
        c.provideImage("n1", Array(0..<12))
        let chunks = c.takeQueue().filter { if case .installSnapshot = $0.payload { return true } else { return false } }
        #expect(chunks.count == 3)
        // A chunk beyond what n3 holds (gap) is not staged: n3 answers "restart" (it holds nothing).
        let gap = c.step("n3", .receive(chunks[1]))
        #expect(!gap.contains { if case .stageSnapshotChunk = $0 { return true } else { return false } })
        #expect(gap.messages.first?.payload == .installSnapshotResponse(snapshotIndex: c.images["n1"]!.index, receivedBytes: 0, done: false))
        // In order it is staged; the same chunk again is answered but not staged twice.
        _ = c.step("n3", .receive(chunks[0]))
        let dup = c.step("n3", .receive(chunks[0]))
        #expect(!dup.contains { if case .stageSnapshotChunk = $0 { return true } else { return false } })
        #expect(dup.messages.first?.payload == .installSnapshotResponse(snapshotIndex: c.images["n1"]!.index, receivedBytes: 4, done: false))
        // A chunk from a deposed leader's term is refused by the term check, never staged.
        var old = chunks[2]
        old.term -= 1
        let stale = c.step("n3", .receive(old))
        #expect(!stale.contains { if case .stageSnapshotChunk = $0 { return true } else { return false } })
        #expect(c.staged["n3"] == Array(0..<4))
        // A stale ack for another snapshot index does not move the leader's record.
        let before = c["n1"].progress["n3"]!
        c.step("n1", .receive(Message(from: "n3", to: "n1", term: c["n1"].term,
                                       payload: .installSnapshotResponse(snapshotIndex: 1, receivedBytes: 8, done: false))))
        #expect(c["n1"].progress["n3"]!.snapshotOffset == before.snapshotOffset)
    }

    @Test func leaderChangeMidTransferRestartsFromTheNewLeader() {
        var c = clusterWithLaggingFollower(chunkSize: 4)
        c.tickAll(2)
        c.provideImage("n1", Array(repeating: 1, count: 16))
        // n3 receives one chunk of n1's image, then n1 is deposed.
        let q = c.takeQueue()
        let first = q.first { if case .installSnapshot(let ch) = $0.payload { return ch.offset == 0 } else { return false } }!
        c.step("n3", .receive(first))
        #expect(c.staged["n3"]?.count == 4)
        // n2 compacted too, so n3 (still far behind) needs a snapshot from it once it leads.
        c.step("n2", .compact(index: c["n2"].appliedIndex))
        c.isolate("n1")
        for _ in 0..<60 where c["n2"].role != .leader { c.tickAll(1) }
        #expect(c["n2"].role == .leader)
        #expect(c["n2"].status.progress["n3"]?.state == .snapshot)
        #expect(c.imageRequests["n2", default: 0] >= 1)
        let image2: [UInt8] = Array(repeating: 2, count: 10)
        c.provideImage("n2", image2)
        for _ in 0..<20 {
            c.deliverAll()
            c.tickAll(1, deliver: false)
        }
        // The old leader's partial transfer was dropped; n3 staged n2's image from offset 0.
        #expect(c.staged["n3"] == image2)
        #expect(restores(c, "n3").last?.index == c.images["n2"]?.index)
        #expect(c["n3"].commitIndex == c["n2"].commitIndex)
        c.propose("n2", "n2-write")
        c.deliverAll()
        c.tickAll(2)
        #expect(c.payloads("n3") == ["n2-write"])  // everything before it came with the snapshot
    }

    @Test func followerRestartMidTransferStartsOver() {
        var c = clusterWithLaggingFollower(chunkSize: 4)
        c.tickAll(2)
        let image: [UInt8] = (0..<16).map { UInt8($0) }
        c.provideImage("n1", image)
        // Two chunks arrive, then n3 restarts (losing its volatile transfer state and staging).
        var delivered = 0
        c.deliverAll { m in
            if case .installSnapshot = m.payload { delivered += 1; return delivered <= 2 }
            return true
        }
        c.nodes["n3"] = RaftNode(id: "n3", config: c["n3"].config, state: PersistentState(
            hardState: c["n3"].hardState, snapshot: c["n3"].log.snapshot, entries: c["n3"].log.entries))
        c.staged["n3"] = nil
        for _ in 0..<20 {
            c.deliverAll()
            c.tickAll(1, deliver: false)
        }
        #expect(c.staged["n3"] == image)
        #expect(restores(c, "n3").count == 1)
        #expect(c["n3"].commitIndex == c["n1"].commitIndex)
    }

    @Test func compactionStopsAtASnapshotBeingStreamed() {
        var c = clusterWithLaggingFollower(chunkSize: 4)
        c.tickAll(2)
        c.provideImage("n1", Array(repeating: 3, count: 40))
        let streamed = c.images["n1"]!.index
        c.deliverAll(limit: 5)  // n3 stages the first window and one ack arrives: it is alive
        #expect(c["n1"].progress["n3"]!.snapshotOffset > 0)
        for i in 0..<5 { c.propose("n1", "more\(i)") }
        c.deliverAll { m in
            switch m.payload {
            case .installSnapshot, .installSnapshotResponse: return false  // the transfer is still going
            default: return true
            }
        }
        c.step("n1", .compact(index: c["n1"].appliedIndex))
        // n3 will need the entries after the streamed image: they stay in the log.
        #expect(c["n1"].log.snapshotIndex <= streamed)
        #expect(c["n1"].log.term(at: streamed + 1) != nil)
    }

    @Test func staleImageIsIgnoredAndAnotherRequested() {
        var c = clusterWithLaggingFollower(chunkSize: 4)
        c.tickAll(2)
        let requests = c.imageRequests["n1", default: 0]
        // An image older than the compaction point cannot help n3: ignored.
        c.step("n1", .snapshotReady(index: c["n1"].log.snapshotIndex - 1, size: 10))
        #expect(c["n1"].snapshotSource == nil)
        c.tickAll(2)
        #expect(c.imageRequests["n1", default: 0] > requests)
    }

    @Test func followerWithMatchingEntriesSkipsRestore() {
        var c = TestCluster(3)
        c.elect("n1")
        for i in 0..<4 { c.propose("n1", "m\(i)") }
        c.deliverAll()
        let meta = SnapshotMetadata(index: 3, term: c["n1"].term, membership: Membership(voters: c.ids))
        // n2 already holds index 3 (committed): a snapshot for it is acknowledged, not installed.
        let chunk = SnapshotChunk(metadata: meta, offset: 0, totalSize: 1, data: [9], done: true)
        let actions = c.step("n2", .receive(Message(from: "n1", to: "n2", term: c["n1"].term, payload: .installSnapshot(chunk))))
        #expect(!actions.contains { if case .restoreSnapshot = $0 { return true } else { return false } })
        #expect(!actions.contains { if case .stageSnapshotChunk = $0 { return true } else { return false } })
        #expect(actions.messages.contains { $0.payload == .installSnapshotResponse(snapshotIndex: 3, receivedBytes: 1, done: true) })
    }
}
