import EmberCore
import EmberRaft
import Foundation
import Testing

@testable import EmberCluster
@testable import EmberNodeStore
@testable import EmberServer
@testable import EmberStorage

@Suite struct RaftPersistenceTests {
    func tempStore() throws -> EmberStore {
        var o = StoreOptions()
        o.mapSize = 1 << 28
        return try EmberStore(directory: NSTemporaryDirectory() + "ember-cluster-\(UUID().uuidString)", options: o)
    }

    func normal(_ index: UInt64, _ term: UInt64, _ path: String, _ json: String) throws -> EmberRaft.LogEntry {
        let e = EmberStorage.LogEntry(index: 0, term: 0, namespace: "ns", operation: .set(path: try Path(path), value: try JSON.parse(json)),
                                      timestamp: 1_700_000_000_000)
        return EmberRaft.LogEntry(index: index, term: term, kind: .normal, data: e.encoded())
    }

    @Test func raftEntriesRoundTripThroughTheStoreAndSnapshotsInstall() async throws {
        let a = try tempStore()
        let entries = [
            EmberRaft.LogEntry(index: 1, term: 1, kind: .noop),
            try normal(2, 1, "x", #"{"a":1,"t":{".sv":"timestamp"}}"#),
            try normal(3, 1, "y", "2"),
            try normal(4, 2, "z", "3"),
        ]
        try await a.append(entries: try entries.map(RaftPersistence.storageEntry))
        try await a.applyCommitted(through: 3)

        // Restart view: the applied state is the snapshot, the unapplied tail is the log.
        let (state, applied, lastTimestamp) = try await RaftPersistence.load(a, voters: ["n1", "n2"])
        #expect(applied == 3)
        #expect(lastTimestamp == 1_700_000_000_000)
        #expect(state.snapshot.index == 3 && state.snapshot.term == 1)
        #expect(state.entries.map(\.index) == [4] && state.entries[0].term == 2)
        #expect(try RaftPersistence.storageEntry(state.entries[0]).operation == .set(path: try Path("z"), value: .int(3)))

        // A snapshot file of it installs into an empty store with the same state.
        let file = NSTemporaryDirectory() + "ember-snapfile-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: file) }
        let info = try a.writeSnapshotFile(path: file, maxChunkBytes: 64)
        #expect(info.index == 3 && info.term == 1)
        let b = try tempStore()
        try await b.installSnapshot(file: file)
        #expect(b.appliedIndex == 3)
        #expect(try b.stateHash() == a.stateHash())
        #expect(try b.read(namespace: "ns", path: Path("x")).node == a.read(namespace: "ns", path: Path("x")).node)
        a.close()
        b.close()
    }

    @Test func membershipIsPersistedAndTravelsInSnapshots() async throws {
        let a = try tempStore()
        let directory = MemberDirectory(members: [
            "n1": .init(peer: "127.0.0.1:7001"), "n2": .init(peer: "127.0.0.1:7002"),
            "n4": .init(peer: "127.0.0.1:7004", url: "http://127.0.0.1:9004"),
        ])
        let removal = MemberDirectory(members: directory.members.filter { $0.key != "n1" })
        func config(_ index: UInt64, _ d: MemberDirectory) -> EmberRaft.LogEntry {
            EmberRaft.LogEntry(index: index, term: 1, kind: .configChange,
                               data: ConfigEntry(membership: Membership(voters: d.voters), context: d.context).encoded())
        }
        let entries = [EmberRaft.LogEntry(index: 1, term: 1, kind: .noop), try normal(2, 1, "x", "1"),
                       config(3, directory), config(4, removal)]
        try await a.append(entries: try entries.map(RaftPersistence.storageEntry))
        try await a.applyCommitted(through: 3)

        // Applied change: in the snapshot's membership; unapplied one: back as a config entry.
        let (state, _, _) = try await RaftPersistence.load(a, voters: ["n1", "n2", "n3"])
        #expect(state.snapshot.membership.voters == ["n1", "n2", "n4"])
        #expect(state.entries.count == 1 && state.entries[0].kind == .configChange)
        let tail = try #require(ConfigEntry(decoding: state.entries[0].data))
        #expect(tail.membership.voters == ["n2", "n4"] && MemberDirectory(context: tail.context) == removal)
        let node = RaftNode(id: "n2", config: RaftConfig(), state: state, appliedIndex: 3)
        #expect(node.membership.voters == ["n2", "n4"])
        #expect(node.membershipContext.flatMap { MemberDirectory(context: $0) } == removal)

        // A node restored from the snapshot (a new member) knows the directory and its URLs.
        let file = NSTemporaryDirectory() + "ember-snapfile-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: file) }
        _ = try a.writeSnapshotFile(path: file)
        let b = try tempStore()
        try await b.installSnapshot(file: file)
        #expect(try RaftPersistence.storedDirectory(b) == directory)
        let (restored, _, _) = try await RaftPersistence.load(b, voters: [])
        #expect(restored.snapshot.membership.voters == ["n1", "n2", "n4"])
        #expect(try RaftPersistence.storedDirectory(b)?.members["n4"]?.url == "http://127.0.0.1:9004")
        a.close()
        b.close()
    }

    @Test func startingRaftSerializesNothing() async throws {
        // The compaction point is the store's applied position, read without touching the tree.
        let a = try tempStore()
        try await a.append(entries: try [EmberRaft.LogEntry(index: 1, term: 1, kind: .noop), try normal(2, 1, "x", "1")]
            .map(RaftPersistence.storageEntry))
        try await a.applyCommitted(through: 2)
        let (state, applied, _) = try await RaftPersistence.load(a, voters: ["n1"])
        #expect(applied == 2 && state.snapshot.index == 2 && state.snapshot.term == 1 && state.entries.isEmpty)
        a.close()
    }
}

extension RaftPersistenceTests {
    /// The leader's flush appends a forwarded write from the entry decoded at its check when it
    /// is that entry (same index and term), and decodes the bytes otherwise.
    @Test func aFlushUsesTheEntryDecodedAtItsCheckOnlyForThatEntry() throws {
        let raft = try normal(7, 3, "a", "1")
        var checked = try EmberStorage.LogEntry(decoding: raft.data)
        checked.timestamp = 42  // tells the remembered entry from one decoded from the bytes
        var buffer = DecodedEntries()
        buffer.remember(checked, index: 7, term: 3)
        let used = try buffer.storageEntry(raft)
        #expect(used.timestamp == 42 && used.index == 7 && used.term == 3)
        #expect(try buffer.storageEntry(try normal(7, 4, "a", "1")).timestamp == 1_700_000_000_000)  // another term
        #expect(try buffer.storageEntry(try normal(8, 3, "a", "1")).timestamp == 1_700_000_000_000)  // another index
        buffer.forget()
        #expect(try buffer.storageEntry(raft).timestamp == 1_700_000_000_000)
        #expect(try buffer.storageEntry(raft) == RaftPersistence.storageEntry(raft))
    }
}

@Suite struct RequestBookTests {
    func result(_ index: UInt64, _ term: UInt64) -> WriteResult {
        WriteResult(index: index, term: term, namespace: "ns", path: .root, outcome: .applied(changed: true),
                    value: .empty, version: index, changeSet: ChangeSet(namespace: "ns", changes: []))
    }

    func write(_ c: CheckedContinuation<WriteResult, any Error>, leaderIn: Duration = .seconds(5)) -> PendingWrite {
        PendingWrite(payload: [], reply: .waiter(c), leaderDeadline: .now + leaderIn, deadline: .now + .seconds(10))
    }

    /// A restarted node's reads are numbered from a random point: a ReadIndex answer the leader
    /// sends late to the previous process (the peer link delivers it to the new one) names no
    /// read of the new process, so no new read is released at an old read index.
    @Test func readIDsOfANewProcessDoNotRepeatThePreviousOnes() async throws {
        var before = RequestBook(recentLimit: 4), after = RequestBook(recentLimit: 4)
        var old: Set<UInt64> = [], new: Set<UInt64> = []
        for _ in 0..<1_000 {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                old.insert(before.addRead(PendingRead(reply: c, deadline: .now + .seconds(1))))
                new.insert(after.addRead(PendingRead(reply: c, deadline: .now + .seconds(1))))
                c.resume()
            }
        }
        #expect(old.count == 1_000 && new.count == 1_000)
        #expect(old.isDisjoint(with: new), "a read of the new process shares an id with one of the old")
        #expect(!old.contains(1) && !new.contains(1))
    }

    @Test func sameTermAtTheIndexIsOurWrite() async throws {
        let r = try await withCheckedThrowingContinuation { c in
            var book = RequestBook(recentLimit: 4)
            book.awaitApply(index: 5, term: 2, write(c), appliedIndex: 4)
            book.applied(result(5, 2))
        }
        #expect(r.index == 5 && r.term == 2)
    }

    @Test func otherTermAtTheIndexMeansOverwritten() async {
        await #expect(throws: ClusterError.self) {
            _ = try await withCheckedThrowingContinuation { c in
                var book = RequestBook(recentLimit: 4)
                book.awaitApply(index: 5, term: 2, write(c), appliedIndex: 4)
                book.applied(result(5, 3))
            }
        }
    }

    /// A book with a forwarded batch at the leader (the only time a late answer can come).
    func bookWithBatchInFlight(recentLimit: Int, _ c: CheckedContinuation<WriteResult, any Error>) -> RequestBook {
        var book = RequestBook(recentLimit: recentLimit)
        book.park(write(c))
        _ = book.forwarding.nextBatch(to: "n2", now: .now, deadline: .now + .seconds(5), maxWrites: 8, maxBytes: 1024) { _ in 1 }
        return book
    }

    @Test func lateReplyIsAnsweredFromRecentResults() async throws {
        let r = try await withCheckedThrowingContinuation { c in
            var book = bookWithBatchInFlight(recentLimit: 2, c)
            for i in UInt64(1)...3 { book.applied(result(i, 1)) }
            let batch = book.forwarding.inFlight!
            let answer = book.forwarding.answered(batch: batch.id, from: "n2", results: [.accepted(index: 3, term: 1)])!
            book.awaitApply(index: 3, term: 1, answer.accepted[0].write, appliedIndex: 3)
        }
        #expect(r.index == 3)
        // Index 1 fell out of the ring of 2: the outcome is unknown, not guessed.
        await #expect(throws: ClusterError.self) {
            _ = try await withCheckedThrowingContinuation { c in
                var book = bookWithBatchInFlight(recentLimit: 2, c)
                for i in UInt64(1)...3 { book.applied(result(i, 1)) }
                let batch = book.forwarding.inFlight!
                let answer = book.forwarding.answered(batch: batch.id, from: "n2", results: [.accepted(index: 1, term: 1)])!
                book.awaitApply(index: 1, term: 1, answer.accepted[0].write, appliedIndex: 3)
            }
        }
    }

    @Test func recentResultsKeepTheLastIndexesOfTheirRing() {
        var ring = RecentResults(capacity: 4)
        #expect(ring.isEmpty)
        for i: UInt64 in [5, 6, 9, 12] { ring.insert(result(i, 1)) }
        #expect(!ring.isEmpty)
        // 9 took 5's slot (9 % 4 == 5 % 4) and 12 the slot of 8 (never applied here).
        #expect(ring.result(at: 5) == nil)
        #expect(ring.result(at: 6)?.index == 6)
        #expect(ring.result(at: 9)?.index == 9)
        #expect(ring.result(at: 12)?.index == 12)
        // An index mapping to a kept slot is not answered with another index's result.
        #expect(ring.result(at: 13) == nil)
        #expect(ring.result(at: 2) == nil)
        #expect(ring.result(at: 8) == nil)
    }

    @Test func resultsAreNotKeptWithNoBatchAtTheLeader() async {
        // Applied while nothing was forwarded: no answer can refer to them later, so they are
        // not kept (the leader's own writes wait for their index before it is applied).
        await #expect(throws: ClusterError.self) {
            _ = try await withCheckedThrowingContinuation { c in
                var book = RequestBook(recentLimit: 4)
                for i in UInt64(1)...3 { book.applied(result(i, 1)) }
                #expect(book.recent.isEmpty)
                book.awaitApply(index: 3, term: 1, write(c), appliedIndex: 3)
            }
        }
    }

    @Test func parkedWritesFailAfterTheLeaderDeadline() async {
        await #expect(throws: ClusterError.self) {
            _ = try await withCheckedThrowingContinuation { c in
                var book = RequestBook(recentLimit: 2)
                book.park(write(c, leaderIn: .zero))
                book.expire(now: .now, noLeaderSeconds: 5)
                #expect(book.forwarding.isEmpty)
            }
        }
    }

    @Test func compactionLeavesTheCatchUpEntriesInTheLog() {
        var config = ClusterConfiguration(nodeID: "n1", peerListen: PeerAddress(host: "127.0.0.1", port: 1), peers: [:],
                                          tlsCertificatePath: "", tlsKeyPath: "", tlsCAPath: "")
        config.snapshotEveryEntries = 100
        config.snapshotCatchUpEntries = 40
        #expect(config.compactionIndex(applied: 139, snapshotIndex: 0) == nil)
        #expect(config.compactionIndex(applied: 140, snapshotIndex: 0) == 100)
        #expect(config.compactionIndex(applied: 239, snapshotIndex: 100) == nil)
        #expect(config.compactionIndex(applied: 500, snapshotIndex: 100) == 460)
        config.snapshotCatchUpEntries = 0  // the old rule: compact at the applied index
        #expect(config.compactionIndex(applied: 100, snapshotIndex: 0) == 100)
    }

    @Test func aSnapshotInstallFailsTheWritesItCoversAtOnceAndKeepsLaterOnes() {
        let turn = SinkTurn()
        let outcomes = CollectingSink()
        let sink = ClusterPipelineSink(sink: outcomes, turn: turn) { _ in }
        var book = RequestBook(recentLimit: 2)
        for index in UInt64(5)...8 {
            book.awaitApply(index: index, term: 2, PendingWrite(payload: [1], reply: .sink(tag: index, sink), leaderDeadline: .now + .seconds(5),
                                                                deadline: .now + .seconds(10)), appliedIndex: 4)
        }
        // A snapshot through 6 replaced the state: 5 and 6 can never be applied here.
        book.replacedBySnapshot(through: 6)
        turn.flushAll()
        #expect(outcomes.tags == [5, 6] && outcomes.failures == 2)
        // 7 and 8 are still answered by their applies.
        book.applied(result(7, 2))
        book.applied(result(8, 2))
        turn.flushAll()
        #expect(outcomes.tags == [5, 6, 7, 8] && outcomes.failures == 2)
        #expect(book.waiters.isEmpty)
    }

    @Test func anUnansweredBatchFailsAsUnknownAfterTheTimeout() {
        let turn = SinkTurn()
        let outcomes = CollectingSink()
        let sink = ClusterPipelineSink(sink: outcomes, turn: turn) { _ in }
        var book = RequestBook(recentLimit: 2)
        for i in 0..<3 {
            book.park(PendingWrite(payload: [1], reply: .sink(tag: UInt64(i), sink), leaderDeadline: .now + .seconds(5),
                                   deadline: .now + .seconds(10)))
        }
        let start = ContinuousClock.now
        _ = book.forwarding.nextBatch(to: "n1", now: start, deadline: start + .seconds(3), maxWrites: 2, maxBytes: 100) { $0.payload.count }
        book.expire(now: start + .seconds(1), noLeaderSeconds: 5)
        #expect(book.forwarding.inFlight != nil)
        book.expire(now: start + .seconds(3), noLeaderSeconds: 5)
        #expect(book.forwarding.inFlight == nil && book.forwarding.waiting.map(\.tag) == [2])
        turn.flushAll()
        #expect(outcomes.tags == [0, 1])
        #expect(outcomes.failures == 2)
    }
}

/// Outcomes handed to a pipelined writer's sink, for the tests.
final class CollectingSink: WriteOutcomeSink, @unchecked Sendable {
    var tags: [UInt64] = []
    var failures = 0
    func completed(_ outcomes: [(tag: UInt64, outcome: Result<EmberServer.WriteOutcome, any Error>)]) {
        for (tag, o) in outcomes {
            tags.append(tag)
            if case .failure = o { failures += 1 }
        }
    }
}
