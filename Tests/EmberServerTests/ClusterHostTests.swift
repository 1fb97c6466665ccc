import EmberTestSupport
import EmberCore
@testable import EmberRaft
import Foundation
import Synchronization
import Testing

@testable import EmberCluster
@testable import EmberNodeStore
@testable import EmberServer
@testable import EmberStorage

@Suite struct RaftPersistenceTests {
    func tempStore() throws -> EmberStore {
        var o = StoreOptions()
        o.mapSize = 1 << 28
        return try EmberStore(directory: TestDirectory.root + "ember-cluster-\(UUID().uuidString)", options: o)
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
        let file = TestDirectory.root + "ember-snapfile-\(UUID().uuidString)"
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
        let file = TestDirectory.root + "ember-snapfile-\(UUID().uuidString)"
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

    /// A write appended to the log waits for its apply without its payload (a bulk import's
    /// chunk stayed in memory until applied, on top of the log's copy).
    @Test func aWriteWaitingForItsApplyHoldsNoPayload() async throws {
        let r = try await withCheckedThrowingContinuation { c in
            var book = RequestBook(recentLimit: 4)
            book.awaitApply(index: 5, term: 2, PendingWrite(payload: Array(repeating: 1, count: 1 << 20), reply: .waiter(c),
                                                            leaderDeadline: .now + .seconds(5), deadline: .now + .seconds(10)),
                            appliedIndex: 4)
            #expect(book.waiters[5]?.map(\.write.payload.count) == [0])
            book.applied(result(5, 2))
        }
        #expect(r.index == 5)
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

    func bigResult(_ index: UInt64, children: Int) -> WriteResult {
        var r = result(index, 1)
        r.value = Node(children: KeyMap(uniqueKeysWithValues: (0..<children).map { ("child\($0)", Node(.string(String(repeating: "x", count: 100)))) }))
        return r
    }

    /// A result keeps the value its client is answered with (a PATCH's whole patch): the ring
    /// is bounded by those values' bytes as well as by count (issue 42: 4,096 results of a bulk
    /// import's chunks). A flood of big results never takes it past its budget.
    @Test func recentResultsStayWithinTheirByteBudget() {
        var ring = RecentResults(capacity: 4_096, maxBytes: 100_000)
        let one = RecentResults.weight(bigResult(1, children: 100), limit: .max)
        #expect(one > 100 * 100 && one < 30_000, "a value of 100 children of 100 bytes weighs about that")
        for i: UInt64 in 1...1_000 {
            ring.insert(bigResult(i, children: 100))
            #expect(ring.bytes <= 100_000)
        }
        #expect(ring.bytes > 0 && ring.result(at: 1_000) != nil, "the newest is kept")
        #expect(ring.result(at: 900) == nil, "older ones went with the budget")
        // Small results overwriting slots give their bytes back.
        var small = RecentResults(capacity: 2, maxBytes: 100_000)
        for i: UInt64 in 1...100 { small.insert(result(i, 1)) }
        #expect(small.bytes == 2 * RecentResults.weight(result(1, 1), limit: .max))
        // A result larger than the whole budget is not kept.
        ring.insert(bigResult(2_000, children: 5_000))
        #expect(ring.result(at: 2_000) == nil && ring.bytes <= 100_000)
    }

    /// Once the batch at the leader is answered, no result applied so far can be asked for: the
    /// book keeps none (a node forwarding an import's chunks held all of their values).
    @Test func anAnsweredBatchLeavesNoResultsKept() async throws {
        let r = try await withCheckedThrowingContinuation { c in
            var book = bookWithBatchInFlight(recentLimit: 16, c)
            for i in UInt64(1)...3 { book.applied(bigResult(i, children: 10)) }
            #expect(!book.recent.isEmpty)
            let batch = book.forwarding.inFlight!
            let answer = book.forwarding.answered(batch: batch.id, from: "n2", results: [.accepted(index: 2, term: 1)])!
            book.awaitApply(index: 2, term: 1, answer.accepted[0].write, appliedIndex: 3)
            book.batchSettled()
            #expect(book.recent.isEmpty && book.recent.bytes == 0)
        }
        #expect(r.index == 2 && r.value.childCount == 10, "the late answer still got its result")
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

    /// A turn handles one tick however many queued up while the last turn waited for its
    /// storage (a follower counting them campaigned after every long apply), and everything
    /// else in order; `.stop` ends the loop after the turn.
    @Test func aTurnHandlesOneTickOfThoseThatQueuedUp() {
        let frame = RaftHost.Input.frame(.notMember(NotMemberNotice(from: "n2", configIndex: 1, commitIndex: 1, voters: ["n2"])))
        let batch: [RaftHost.Input] = [.tick, .tick, frame, .tick, .handOver, .tick, .stop, .tick]
        let turn = RaftHost.turnInputs(batch)
        #expect(turn.stopping)
        #expect(turn.inputs.map { input -> String in
            switch input {
            case .tick: return "tick"
            case .frame: return "frame"
            case .handOver: return "handOver"
            default: return "other"
            }
        } == ["tick", "frame", "handOver"])
        #expect(!RaftHost.turnInputs([.tick, .tick]).stopping && RaftHost.turnInputs([.tick, .tick]).inputs.count == 1)
    }

    /// Raft's log is held in memory: besides the count rule, a log of more than twice
    /// `snapshotCatchUpBytes` is compacted down to that many bytes of applied entries (issue 42:
    /// a bulk import's ~4 MB entries stayed on every member, up to 20,000 of them).
    @Test func compactionBoundsTheLogByBytes() {
        var config = ClusterConfiguration(nodeID: "n1", peerListen: PeerAddress(host: "127.0.0.1", port: 1), peers: [:],
                                          tlsCertificatePath: "", tlsKeyPath: "", tlsCAPath: "")
        config.snapshotCatchUpBytes = 10_000
        var state = PersistentState.bootstrap(voters: ["n1"])
        // 30 entries of 1,000 data bytes (1,024 with the entry's overhead): 30,720 bytes.
        state.entries = (1...30).map { EmberRaft.LogEntry(index: UInt64($0), term: 1, data: Array(repeating: 7, count: 1_000)) }
        let log = RaftLog(snapshot: state.snapshot, entries: state.entries)
        #expect(log.byteCount == 30 * 1_024)
        // Applied through 25: keep 9 entries (9,216 bytes <= 10,000) behind it.
        #expect(config.compactionIndex(applied: 25, log: log) == 16)
        // Nothing applied beyond what the kept bytes allow: no compaction.
        #expect(config.compactionIndex(applied: 9, log: log) == nil)
        // Within twice the budget: not due.
        config.snapshotCatchUpBytes = 16_000
        #expect(config.compactionIndex(applied: 30, log: log) == nil)
        // The count of kept entries bounds it too.
        config.snapshotCatchUpBytes = 10_000
        config.snapshotCatchUpEntries = 3
        #expect(config.compactionIndex(applied: 25, log: log) == 22)
        // One entry larger than the budget: compacted through the applied index.
        config.snapshotCatchUpBytes = 500
        #expect(config.compactionIndex(applied: 25, log: log) == 25)
    }

    @Test func aSnapshotInstallFailsTheWritesItCoversAtOnceAndKeepsLaterOnes() {
        let turn = SinkTurn()
        let outcomes = CollectingSink()
        // Each outcome handed over gives its write's bytes back to admission control.
        let released = Mutex((writes: 0, bytes: 0))
        let sink = ClusterPipelineSink(sink: outcomes, turn: turn) { n, bytes in released.withLock { $0.writes += n; $0.bytes += bytes } }
        var book = RequestBook(recentLimit: 2)
        for index in UInt64(5)...8 {
            book.awaitApply(index: index, term: 2, PendingWrite(payload: [1], reply: .sink(tag: index, bytes: Int(index), sink), leaderDeadline: .now + .seconds(5),
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
        #expect(released.withLock { $0 } == (writes: 4, bytes: 5 + 6 + 7 + 8))
    }

    @Test func anUnansweredBatchFailsAsUnknownAfterTheTimeout() {
        let turn = SinkTurn()
        let outcomes = CollectingSink()
        let sink = ClusterPipelineSink(sink: outcomes, turn: turn) { _, _ in }
        var book = RequestBook(recentLimit: 2)
        for i in 0..<3 {
            book.park(PendingWrite(payload: [1], reply: .sink(tag: UInt64(i), bytes: 1, sink), leaderDeadline: .now + .seconds(5),
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
