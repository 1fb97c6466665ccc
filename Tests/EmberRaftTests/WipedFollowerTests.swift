// A follower whose data dir was wiped returns with an empty log: the leader must lower its
// matchIndex and re-replicate (by entries, or by snapshot once compacted) instead of waiting for
// the next compaction; a stale rejection must still be ignored.

@testable import EmberRaft
import Testing

private func restores(_ c: TestCluster, _ id: NodeID) -> [SnapshotMetadata] {
    (c.events[id] ?? []).compactMap { if case .restoreSnapshot(let s) = $0 { return s } else { return nil } }
}

/// n1 leads a 3-node cluster that committed `entries` writes everywhere.
private func caughtUpCluster(entries: Int) -> TestCluster {
    var c = TestCluster(3)
    c.elect("n1")
    for i in 0..<entries { c.propose("n1", "w\(i)") }
    c.deliverAll()
    c.tickAll(2)
    return c
}

/// Replaces `id` by a node restarted on an empty data dir (what emberd boots from).
private func wipe(_ c: inout TestCluster, _ id: NodeID) {
    c.nodes[id] = RaftNode(id: id, config: c[id].config, state: .bootstrap(voters: c.ids))
    c.applied[id] = []
    c.staged[id] = nil
}

@Suite struct WipedFollowerTests {
    @Test func wipedFollowerIsCaughtUpByEntriesWhileTheLeaderHoldsThem() {
        var c = caughtUpCluster(entries: 10)
        let before = c["n1"].progress["n3"]!.matchIndex
        #expect(before == c["n1"].log.lastIndex)
        let commit = c["n1"].commitIndex
        wipe(&c, "n3")
        c.propose("n1", "after")
        c.deliverAll()
        c.tickAll(3)
        #expect(c["n3"].log.entries == c["n1"].log.entries)
        #expect(c.payloads("n3") == (0..<10).map { "w\($0)" } + ["after"])
        #expect(c["n3"].commitIndex == c["n1"].commitIndex)
        #expect(c["n1"].progress["n3"]!.matchIndex == c["n1"].log.lastIndex)
        #expect(c["n1"].commitIndex > commit)
        #expect(restores(c, "n3").isEmpty, "entries were still in the leader's log: no snapshot needed")
    }

    /// No write follows the wipe: the heartbeat's commit claim, beyond the wiped log's end,
    /// makes the follower report its loss, and the leader re-replicates without a new entry.
    @Test func wipedFollowerOfAnIdleClusterIsCaughtUpByHeartbeats() {
        var c = caughtUpCluster(entries: 10)
        let last = c["n1"].log.lastIndex
        wipe(&c, "n3")
        for _ in 0..<6 {
            c.tickAll(1, deliver: false)
            c.deliverAll()
        }
        #expect(c["n1"].log.lastIndex == last, "nothing new was proposed")
        #expect(c["n3"].log.entries == c["n1"].log.entries)
        #expect(c.payloads("n3") == (0..<10).map { "w\($0)" })
        #expect(c["n1"].progress["n3"]!.matchIndex == last)
    }

    @Test func wipedFollowerIsCaughtUpBySnapshotWhenCompacted() {
        var c = caughtUpCluster(entries: 10)
        c.step("n1", .compact(index: c["n1"].appliedIndex))
        #expect(c["n1"].log.snapshotIndex > 0)
        wipe(&c, "n3")
        c.propose("n1", "after")
        c.deliverAll()
        c.tickAll(2)
        #expect(c.imageRequests["n1", default: 0] >= 1, "the leader never asked for a snapshot image")
        let image: [UInt8] = Array("image".utf8)
        c.provideImage("n1", image)
        for _ in 0..<10 {
            c.deliverAll()
            c.tickAll(1, deliver: false)
        }
        c.deliverAll()
        #expect(c.staged["n3"] == image)
        #expect(restores(c, "n3").count == 1)
        #expect(c["n3"].log.lastIndex == c["n1"].log.lastIndex)
        #expect(c["n3"].commitIndex == c["n1"].commitIndex)
        #expect(c["n1"].progress["n3"]!.matchIndex == c["n1"].log.lastIndex)
    }

    @Test func wipedFollowerIsDetectedFromItsHintWhilePipelined() {
        // The rejected prevIndex is above matchIndex (entries were in flight), but the hint puts
        // the follower's log end below matchIndex.
        var c = caughtUpCluster(entries: 10)
        let match = c["n1"].progress["n3"]!.matchIndex
        c.isolate("n3")
        c.propose("n1", "in-flight")
        _ = c.takeQueue()
        #expect(c["n1"].progress["n3"]!.state == .replicate)
        #expect(c["n1"].progress["n3"]!.nextIndex == match + 2)
        let actions = c.step("n1", .receive(Message(from: "n3", to: "n1", term: c["n1"].term, payload:
            .appendEntriesResponse(AppendEntriesResponse(success: false, index: match + 1, conflictIndex: 1)))))
        let pr = c["n1"].progress["n3"]!
        #expect(pr.matchIndex == 0)
        #expect(pr.state == .probe)
        let resent = actions.messages.compactMap { m -> AppendEntries? in
            if m.to == "n3", case .appendEntries(let a) = m.payload { return a } else { return nil }
        }
        #expect(resent.first?.prevIndex == 0, "the leader should resend its log from the start")
    }

    @Test func staleRejectionIsStillIgnored() {
        // A rejection of a prevIndex below matchIndex answers a request sent before the follower
        // acknowledged more: it says nothing about the follower's log now.
        var c = caughtUpCluster(entries: 10)
        let before = c["n1"].progress["n3"]!
        let commit = c["n1"].commitIndex
        #expect(before.matchIndex > 3)
        let actions = c.step("n1", .receive(Message(from: "n3", to: "n1", term: c["n1"].term, payload:
            .appendEntriesResponse(AppendEntriesResponse(success: false, index: 2, conflictIndex: 1)))))
        #expect(c["n1"].progress["n3"]!.matchIndex == before.matchIndex)
        #expect(c["n1"].progress["n3"]!.nextIndex == before.nextIndex)
        #expect(c["n1"].progress["n3"]!.state == before.state)
        #expect(actions.messages.isEmpty)
        #expect(c["n1"].commitIndex == commit)
    }

    @Test func commitIndexNeverDecreasesWhenTwoFollowersAreWiped() {
        // Both followers wiped: the leader's commitIndex stays; new entries commit once a
        // majority holds them again.
        var c = caughtUpCluster(entries: 5)
        let commit = c["n1"].commitIndex
        wipe(&c, "n2")
        wipe(&c, "n3")
        c.propose("n1", "after")
        for _ in 0..<5 {
            c.deliverAll()
            #expect(c["n1"].commitIndex >= commit)
            c.tickAll(1, deliver: false)
        }
        c.deliverAll()
        #expect(c["n1"].role == .leader)
        #expect(c["n1"].commitIndex == c["n1"].log.lastIndex)
        for id in ["n2", "n3"] { #expect(c[id].log.entries == c["n1"].log.entries) }
    }
}
