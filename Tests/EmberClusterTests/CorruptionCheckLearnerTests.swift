import EmberTestSupport
import EmberCore
import EmberStorage
import Foundation
import Logging
import Synchronization
import Testing

@testable import EmberCluster

/// Learners in the corruption check (issue 38), on a real store: they are asked and told like
/// voters, a learner holding another hash than the voters' majority raises CORRUPT on itself,
/// and a learner's hash never counts toward (or against) a majority.
@Suite struct CorruptionCheckLearnerTests {
    typealias Sent = CorruptionCheckTests.Sent

    static func make(selfID: String, voters: [String], learners: [String]) async throws -> (CorruptionCheck, EmberStore, Sent) {
        var options = StoreOptions()
        options.mapSize = 1 << 30
        let store = try EmberStore(directory: TestDirectory.root + "ember-corruption-\(UUID().uuidString)", options: options)
        _ = try await store.submit(namespace: "t", .set(path: try Path("a"), value: .int(1), condition: nil))
        let sent = Sent()
        let check = CorruptionCheck(store: store, selfID: selfID, interval: nil, logger: Logger(label: "test"),
                                    voters: { voters }, learners: { learners }, isLeader: { selfID == "n1" },
                                    send: { f, to in sent.frames.withLock { $0.append((f, to)) } })
        return (check, store, sent)
    }

    @Test func aLearnerAgainstTheVotersMajorityRaisesCorruptOnItself() async throws {
        let (check, store, sent) = try await Self.make(selfID: "n4", voters: ["n1", "n2", "n3"], learners: ["n4"])
        defer { store.close() }
        let mine = try #require(await check.round()).mine
        // A learner's round (its first after start) asks and tells every voter.
        #expect(Set(sent.frames.withLock { $0.map(\.1) }) == ["n1", "n2", "n3"])
        check.receive(HashCheck(from: "n1", appliedIndex: mine.index, stateHash: "other", ask: false))
        #expect(store.alarms.active(.corrupt) == nil)  // one voter is no majority
        #expect(check.lastVerdict?.conclusive == false)
        check.receive(HashCheck(from: "n2", appliedIndex: mine.index, stateHash: "other", ask: false))
        let alarm = try #require(store.alarms.active(.corrupt))
        #expect(alarm.message.contains("this learner's state hash is \(mine.hash)"))
        #expect(alarm.message.contains("n1, n2 hold other (a majority of the voters)"))
        let verdict = try #require(check.lastVerdict)
        #expect(verdict.corrupt && verdict.conclusive)
        #expect(verdict.hashes == ["n1": "other", "n2": "other"] && verdict.learnerHashes == ["n4": mine.hash])
        store.alarms.clear(.corrupt)
    }

    @Test func aLearnerAgreeingWithTheVotersMajorityRaisesNothing() async throws {
        let (check, store, _) = try await Self.make(selfID: "n4", voters: ["n1", "n2", "n3"], learners: ["n4", "n5"])
        defer { store.close() }
        let mine = try #require(await check.round()).mine
        check.receive(HashCheck(from: "n1", appliedIndex: mine.index, stateHash: mine.hash, ask: false))
        check.receive(HashCheck(from: "n5", appliedIndex: mine.index, stateHash: "learner-other", ask: false))
        check.receive(HashCheck(from: "n2", appliedIndex: mine.index, stateHash: "other", ask: false))
        // n1 with it, n2 against, n3 unheard: no voters' majority yet, whatever n5 holds.
        #expect(check.lastVerdict?.conclusive == false && check.lastVerdict?.corrupt == false)
        check.receive(HashCheck(from: "n3", appliedIndex: mine.index, stateHash: mine.hash, ask: false))
        #expect(check.lastVerdict?.conclusive == true && check.lastVerdict?.corrupt == false)
        #expect(check.lastVerdict?.learnerHashes == ["n4": mine.hash, "n5": "learner-other"])
        #expect(store.alarms.active(.corrupt) == nil)
    }

    /// Without a voters' majority (every voter heard, two hashes) the voters raise it on
    /// themselves; a learner cannot tell who is right and raises nothing.
    @Test func aLearnerConcludesNothingWithoutAVotersMajority() async throws {
        let (check, store, _) = try await Self.make(selfID: "n4", voters: ["n1", "n2"], learners: ["n4"])
        defer { store.close() }
        let mine = try #require(await check.round()).mine
        check.receive(HashCheck(from: "n1", appliedIndex: mine.index, stateHash: mine.hash, ask: false))
        check.receive(HashCheck(from: "n2", appliedIndex: mine.index, stateHash: "other", ask: false))
        #expect(check.lastVerdict?.conclusive == false && check.lastVerdict?.corrupt == false)
        #expect(store.alarms.active(.corrupt) == nil)
    }

    /// A voter's majority is of voters only: two learners agreeing with it do not save it from
    /// two voters against it, nor make a majority with it before they are heard.
    @Test func learnersNeverCountTowardTheMajority() async throws {
        let (check, store, sent) = try await Self.make(selfID: "n1", voters: ["n1", "n2", "n3"], learners: ["n4", "n5"])
        defer { store.close() }
        let mine = try #require(await check.round()).mine
        // Voters and learners are asked and told.
        #expect(sent.frames.withLock { $0.filter(\.0.ask).map(\.1) }.sorted() == ["n2", "n3", "n4", "n5"])
        check.receive(HashCheck(from: "n4", appliedIndex: mine.index, stateHash: mine.hash, ask: false))
        check.receive(HashCheck(from: "n5", appliedIndex: mine.index, stateHash: mine.hash, ask: false))
        check.receive(HashCheck(from: "n2", appliedIndex: mine.index, stateHash: "other", ask: false))
        #expect(check.lastVerdict?.conclusive == false, "n1 and two learners are not a majority of three voters")
        #expect(store.alarms.active(.corrupt) == nil)
        check.receive(HashCheck(from: "n3", appliedIndex: mine.index, stateHash: "other", ask: false))
        let alarm = try #require(store.alarms.active(.corrupt))
        #expect(alarm.message.contains("this member's state hash is \(mine.hash); n2, n3 hold other"))
        #expect(check.lastVerdict?.learnerHashes == ["n4": mine.hash, "n5": mine.hash])
        #expect(check.lastVerdict?.hashes.keys.sorted() == ["n1", "n2", "n3"])
        store.alarms.clear(.corrupt)
    }

    /// An ask is answered to every voter and learner, so a learner hears every voter's hash.
    @Test func answersGoToVotersAndLearners() async throws {
        let (check, store, sent) = try await Self.make(selfID: "n2", voters: ["n1", "n2", "n3"], learners: ["n4"])
        defer { store.close() }
        let expected = try store.stateHashAtApplied()
        check.receive(HashCheck(from: "n1", appliedIndex: expected.applied, stateHash: "", ask: true))
        let answers = try await CorruptionCheckTests.answers(sent, count: 3)
        #expect(answers.map(\.1).sorted() == ["n1", "n3", "n4"])
        #expect(answers.allSatisfy { $0.0.appliedIndex == expected.applied && $0.0.stateHash == expected.hash })
    }
}
