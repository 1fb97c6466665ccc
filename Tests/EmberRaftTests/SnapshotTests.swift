// Log compaction and chunked InstallSnapshot.

@testable import EmberRaft
import Testing

@Suite struct SnapshotTests {
    @Test func compactionDropsPrefixAndPersistsSnapshot() {
        var c = TestCluster(3)
        c.elect("n1")
        for i in 0..<5 { c.propose("n1", "e\(i)") }
        c.deliverAll()
        let applied = c["n1"].appliedIndex
        let actions = c.step("n1", .compact(index: applied, data: [1, 2, 3]))
        #expect(c["n1"].log.snapshotIndex == applied)
        #expect(c["n1"].log.entries.isEmpty)
        guard case .persistSnapshot(let snap, let discard)? = actions.first else {
            Issue.record("expected persistSnapshot, got \(actions)")
            return
        }
        #expect(!discard)
        #expect(snap.metadata.index == applied && snap.metadata.term == c["n1"].term)
        #expect(snap.metadata.membership.voters == ["n1", "n2", "n3"])
    }

    @Test func laggingFollowerReceivesChunkedSnapshot() {
        var c = TestCluster(3, config: TestCluster.config { $0.snapshotChunkSize = 4 })
        c.elect("n1")
        c.isolate("n3")
        for i in 0..<10 { c.propose("n1", "s\(i)") }
        c.deliverAll()
        let data: [UInt8] = Array(0..<23)  // 6 chunks of <= 4 bytes
        c.step("n1", .compact(index: c["n1"].appliedIndex, data: data))
        c.heal()
        var chunks: [SnapshotChunk] = []
        for _ in 0..<20 {
            c.tickAll(1, deliver: false)
            c.deliverAll { m in
                if case .installSnapshot(let chunk) = m.payload { chunks.append(chunk) }
                return true
            }
        }
        #expect(chunks.count >= 6)
        #expect(chunks.allSatisfy { $0.data.count <= 4 })
        #expect(chunks.last?.done == true)
        // n3 restored the snapshot and then caught up with the log after it.
        let restored = (c.events["n3"] ?? []).compactMap { if case .restoreSnapshot(let s) = $0 { return s } else { return nil } }
        #expect(restored.count == 1)
        #expect(restored.first?.data == data)
        #expect(c["n3"].log.snapshotIndex == c["n1"].log.snapshotIndex)
        #expect(c["n3"].commitIndex == c["n1"].commitIndex)
        // And it keeps replicating normally afterwards.
        c.propose("n1", "after")
        c.deliverAll()
        c.tickAll(2)
        #expect(c["n3"].log.lastIndex == c["n1"].log.lastIndex)
        #expect(c.payloads("n3") == ["after"])
    }

    @Test func snapshotTransferSurvivesLostChunks() {
        var c = TestCluster(3, config: TestCluster.config { $0.snapshotChunkSize = 3 })
        c.elect("n1")
        c.isolate("n3")
        for i in 0..<6 { c.propose("n1", "q\(i)") }
        c.deliverAll()
        let data: [UInt8] = Array(repeating: 7, count: 20)
        c.step("n1", .compact(index: c["n1"].appliedIndex, data: data))
        c.heal()
        var n = 0
        for _ in 0..<60 {
            c.tickAll(1, deliver: false)
            c.deliverAll { m in
                // Drop every third chunk (and it is resent after the next heartbeat response).
                if case .installSnapshot = m.payload { n += 1; return n % 3 != 0 }
                return true
            }
        }
        #expect(c["n3"].log.snapshotIndex == c["n1"].log.snapshotIndex)
        #expect(c["n3"].commitIndex == c["n1"].commitIndex)
    }

    @Test func followerWithMatchingEntriesSkipsRestore() {
        var c = TestCluster(3)
        c.elect("n1")
        for i in 0..<4 { c.propose("n1", "m\(i)") }
        c.deliverAll()
        let snap = Snapshot(
            metadata: SnapshotMetadata(index: 3, term: c["n1"].term, membership: Membership(voters: c.ids)), data: [9])
        // n2 already holds index 3 (committed): a snapshot for it is acknowledged, not installed.
        let chunk = SnapshotChunk(metadata: snap.metadata, offset: 0, totalSize: 1, data: [9], done: true)
        let actions = c.step("n2", .receive(Message(from: "n1", to: "n2", term: c["n1"].term, payload: .installSnapshot(chunk))))
        #expect(!actions.contains { if case .restoreSnapshot = $0 { return true } else { return false } })
        #expect(actions.messages.contains { $0.payload == .installSnapshotResponse(snapshotIndex: 3, receivedBytes: 1, done: true) })
    }
}
