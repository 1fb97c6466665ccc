import EmberTestSupport
import EmberCore
import EmberStorage
import Foundation
import Logging
import Synchronization
import Testing

@testable import EmberCluster

/// The corruption check's judgement on a real store: a member raises CORRUPT on itself only when
/// a majority of the voters holds another hash at the same applied index (or every voter was
/// heard and none is a majority); asked, it answers with its own pair.
@Suite struct CorruptionCheckTests {
    final class Sent: Sendable {
        let frames = Mutex<[(HashCheck, String)]>([])
    }

    static func make(voters: [String], raftLastIndex: (@Sendable () -> UInt64)? = nil) async throws -> (CorruptionCheck, EmberStore, Sent) {
        let dir = TestDirectory.root + "ember-corruption-\(UUID().uuidString)"
        var options = StoreOptions()
        options.mapSize = 1 << 30
        let store = try EmberStore(directory: dir, options: options)
        _ = try await store.submit(namespace: "t", .set(path: try Path("a"), value: .int(1), condition: nil))
        let sent = Sent()
        let check = CorruptionCheck(store: store, selfID: "n1", interval: nil, logger: Logger(label: "test"),
                                    voters: { voters }, raftLastIndex: raftLastIndex ?? { 0 }, isLeader: { true }, send: { f, to in sent.frames.withLock { $0.append((f, to)) } })
        return (check, store, sent)
    }

    @Test func aMinorityHashRaisesCorruptOnItself() async throws {
        let (check, store, sent) = try await Self.make(voters: ["n1", "n2", "n3"])
        defer { store.close() }
        let mine = try #require(await check.round()).mine
        // The request form (no hash) to each, then this member's hash to each.
        #expect(sent.frames.withLock { $0.map { "\($0.1) ask=\($0.0.ask) hash=\(!$0.0.stateHash.isEmpty)" }.sorted() }
                == ["n2 ask=false hash=true", "n2 ask=true hash=false", "n3 ask=false hash=true", "n3 ask=true hash=false"])
        check.receive(HashCheck(from: "n2", appliedIndex: mine.index, stateHash: "other", ask: false))
        #expect(store.alarms.active(.corrupt) == nil)  // one against one: not yet
        check.receive(HashCheck(from: "n3", appliedIndex: mine.index, stateHash: "other", ask: false))
        let alarm = try #require(store.alarms.active(.corrupt))
        #expect(alarm.message.contains("n2, n3 hold other"))
        #expect(check.lastVerdict?.corrupt == true && check.lastVerdict?.conclusive == true)
        store.alarms.clear(.corrupt)
    }

    @Test func aMajorityWithThisMemberRaisesNothing() async throws {
        let (check, store, _) = try await Self.make(voters: ["n1", "n2", "n3"])
        defer { store.close() }
        let mine = try #require(await check.round()).mine
        check.receive(HashCheck(from: "n3", appliedIndex: mine.index, stateHash: "other", ask: false))
        check.receive(HashCheck(from: "n2", appliedIndex: mine.index, stateHash: mine.hash, ask: false))
        #expect(store.alarms.active(.corrupt) == nil)
        #expect(check.lastVerdict?.conclusive == true && check.lastVerdict?.corrupt == false)
        // Another index is not compared.
        check.receive(HashCheck(from: "n2", appliedIndex: mine.index + 5, stateHash: "x", ask: false))
        check.receive(HashCheck(from: "n3", appliedIndex: mine.index + 5, stateHash: "x", ask: false))
        #expect(store.alarms.active(.corrupt) == nil)
    }

    @Test func everyVoterHeardWithoutAMajorityRaisesIt() async throws {
        let (check, store, _) = try await Self.make(voters: ["n1", "n2"])
        defer { store.close() }
        let mine = try #require(await check.round()).mine
        check.receive(HashCheck(from: "n2", appliedIndex: mine.index, stateHash: "other", ask: false))
        #expect(store.alarms.active(.corrupt)?.message.contains("no hash is held by a majority") == true)
        store.alarms.clear(.corrupt)
    }

    @Test func anAskIsAnsweredWithThisMembersPair() async throws {
        let (check, store, sent) = try await Self.make(voters: ["n1", "n2", "n3"])
        defer { store.close() }
        let expected = try store.stateHashAtApplied()
        check.receive(HashCheck(from: "n2", appliedIndex: expected.applied, stateHash: expected.hash, ask: true))
        let deadline = ContinuousClock.now + .seconds(10)
        while sent.frames.withLock({ $0.count < 2 }) && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        // To every other voter, not only the asker.
        let answers = sent.frames.withLock { $0 }
        #expect(answers.map(\.1).sorted() == ["n2", "n3"])
        for answer in answers {
            #expect(!answer.0.ask && answer.0.appliedIndex == expected.applied && answer.0.stateHash == expected.hash)
        }
        #expect(store.alarms.active(.corrupt) == nil)
    }

    static func answers(_ sent: Sent, count: Int) async throws -> [(HashCheck, String)] {
        let deadline = ContinuousClock.now + .seconds(10)
        while sent.frames.withLock({ $0.filter { !$0.0.ask }.count < count }) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        return sent.frames.withLock { $0.filter { !$0.0.ask } }
    }

    /// A follower's store holding a leader's log of three sets, applied through index 1, and the
    /// leader's hash after each entry.
    static func follower() async throws -> (EmberStore, [UInt64: String], [LogEntry]) {
        var options = StoreOptions()
        options.mapSize = 1 << 30
        let leader = try EmberStore(directory: TestDirectory.root + "ember-corruption-\(UUID().uuidString)", options: options)
        defer { leader.close() }
        var hashes: [UInt64: String] = [:]
        for (i, key) in ["a", "b", "c"].enumerated() {
            _ = try await leader.submit(namespace: "t", .set(path: try Path(key), value: .int(Int64(i)), condition: nil))
            let h = try leader.stateHashAtApplied()
            hashes[h.applied] = h.hash
        }
        let f = try EmberStore(directory: TestDirectory.root + "ember-corruption-\(UUID().uuidString)", options: options)
        let entries = try leader.entries(from: 1)
        try await f.append(entries: entries)
        _ = try await f.applyCommitted(through: 1)
        return (f, hashes, entries)
    }

    static func check(_ store: EmberStore, _ sent: Sent, raftLastIndex: @escaping @Sendable () -> UInt64 = { 0 }) -> CorruptionCheck {
        CorruptionCheck(store: store, selfID: "n1", interval: nil, logger: Logger(label: "test"),
                        voters: { ["n1", "n2", "n3"] }, raftLastIndex: raftLastIndex, isLeader: { true },
                        send: { f, to in sent.frames.withLock { $0.append((f, to)) } })
    }

    /// An ask for the next index is queued on the writer when it arrives: an apply queued right
    /// after it (a commit in the next Raft frame) stops at the asked index first, so the answer
    /// is the hash there, not a fallback at a later applied index.
    @Test func anAskForTheNextIndexStopsTheApplyThere() async throws {
        let (store, hashes, _) = try await Self.follower()
        defer { store.close() }
        let sent = Sent()
        let check = Self.check(store, sent)
        check.receive(HashCheck(from: "n2", appliedIndex: 2, stateHash: "", ask: true))
        _ = try await store.applyCommitted(through: 3)
        #expect(store.appliedIndex == 3)
        let answers = try await Self.answers(sent, count: 2)
        #expect(answers.map(\.1).sorted() == ["n2", "n3"])
        for answer in answers {
            #expect(answer.0.appliedIndex == 2 && answer.0.stateHash == hashes[2])
        }
    }

    /// A round asks at the Raft log's last index when the store's log is behind it (entries are
    /// sent to followers before the leader's own log holds them), and waits for its own apply there.
    @Test func aRoundAsksAtTheRaftLogsLastIndex() async throws {
        let (full, hashes, entries) = try await Self.follower()
        full.close()
        var options = StoreOptions()
        options.mapSize = 1 << 30
        let store = try EmberStore(directory: TestDirectory.root + "ember-corruption-\(UUID().uuidString)", options: options)
        defer { store.close() }
        try await store.append(entries: Array(entries.prefix(2)))
        _ = try await store.applyCommitted(through: 1)
        let sent = Sent()
        // The store's log ends at 2; the Raft log (in memory) at 3, sent but not yet stored here.
        let check = Self.check(store, sent, raftLastIndex: { 3 })
        #expect(store.lastLogIndex == 2)
        async let round = check.round()
        let deadline = ContinuousClock.now + .seconds(10)
        while sent.frames.withLock({ $0.filter(\.0.ask).count < 2 }) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(sent.frames.withLock { $0.filter(\.0.ask).map(\.0.appliedIndex) } == [3, 3])
        // The entry arrives and is applied with the one before it: the round's hash is at 3.
        try await store.append(entries: [entries[2]])
        _ = try await store.applyCommitted(through: 3)
        let (target, mine) = try #require(await round)
        #expect(target == 3 && mine.index == 3 && mine.hash == hashes[3])
    }
}
