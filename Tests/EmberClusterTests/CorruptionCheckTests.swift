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

    static func make(voters: [String]) async throws -> (CorruptionCheck, EmberStore, Sent) {
        let dir = NSTemporaryDirectory() + "ember-corruption-\(UUID().uuidString)"
        var options = StoreOptions()
        options.mapSize = 1 << 30
        let store = try EmberStore(directory: dir, options: options)
        _ = try await store.submit(namespace: "t", .set(path: try Path("a"), value: .int(1), condition: nil))
        let sent = Sent()
        let check = CorruptionCheck(store: store, selfID: "n1", interval: nil, logger: Logger(label: "test"),
                                    voters: { voters }, isLeader: { true }, send: { f, to in sent.frames.withLock { $0.append((f, to)) } })
        return (check, store, sent)
    }

    @Test func aMinorityHashRaisesCorruptOnItself() async throws {
        let (check, store, sent) = try await Self.make(voters: ["n1", "n2", "n3"])
        defer { store.close() }
        let mine = try #require(await check.round())
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
        let mine = try #require(await check.round())
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
        let mine = try #require(await check.round())
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
}
