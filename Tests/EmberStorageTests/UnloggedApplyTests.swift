import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// A learner's apply (`applyUnlogged`): committed entries applied without log rows, the log
/// starting after the applied index, the same state and results as a logged apply.
@Suite struct UnloggedApplyTests {
    static func entry(_ i: UInt64, _ path: String, _ json: String, term: UInt64 = 1) -> LogEntry {
        LogEntry(index: i, term: term, namespace: "t", operation: .set(path: p(path), value: j(json), condition: nil), timestamp: Int64(i))
    }

    static func logRows(_ s: EmberStore) throws -> Int {
        try s.entries(from: 0, maxCount: 1_000_000).count
    }

    @Test func appliesWithoutLogRowsLikeALoggedApply() async throws {
        let logged = try openStore()
        let unlogged = try openStore()
        let entries = (1...40).map { i in Self.entry(UInt64(i), "/r/\(i % 7)", "{\"n\":\(i)}") }
        var stream = unlogged.commits().makeAsyncIterator()
        try await logged.appendAndApply(entries: entries, through: 40)
        let results = try await unlogged.applyUnlogged(entries: entries)
        #expect(results.map(\.index) == Array(1...40))
        // Results reach the store's listeners as any apply's do.
        #expect(await stream.next()?.index == 1)
        #expect(unlogged.appliedIndex == 40 && unlogged.lastLogIndex == 40 && unlogged.firstLogIndex == 41)
        #expect(try Self.logRows(unlogged) == 0 && Self.logRows(logged) == 40)
        #expect(try unlogged.stateHash() == logged.stateHash())
        #expect(try unlogged.ver("/r/3") == logged.ver("/r/3"))
        // The next batch follows the applied index, as a learner's next message does.
        let more = (41...45).map { i in Self.entry(UInt64(i), "/s/\(i)", "\(i)", term: 2) }
        try await logged.appendAndApply(entries: more, through: 45)
        let (r2, release) = try await unlogged.applyUnloggedReleasing(entries: more)
        await unlogged.committed(release)
        #expect(r2.map(\.index) == Array(41...45))
        #expect(try unlogged.appliedPosition().term == 2 && unlogged.lastLogTerm == 2)
        #expect(try unlogged.stateHash() == logged.stateHash())
    }

    @Test func refusesWhatIsNotTheNextCommittedRun() async throws {
        let s = try openStore()
        try await s.applyUnlogged(entries: [Self.entry(1, "/a", "1")])
        await #expect(throws: StorageError.self) { try await s.applyUnlogged(entries: [Self.entry(3, "/a", "3")]) }  // gap
        await #expect(throws: StorageError.self) { try await s.applyUnlogged(entries: [Self.entry(1, "/a", "1")]) }  // applied
        await #expect(throws: StorageError.self) {
            try await s.applyUnlogged(entries: [Self.entry(2, "/a", "2"), Self.entry(4, "/a", "4")])
        }
        // An unapplied logged tail (entries appended, not committed yet) must be applied first.
        try await s.append(entries: [Self.entry(2, "/a", "2")])
        await #expect(throws: StorageError.self) { try await s.applyUnlogged(entries: [Self.entry(3, "/a", "3")]) }
        #expect(s.appliedIndex == 1 && s.lastLogIndex == 2)
        try await s.applyCommitted(through: 2)
        try await s.applyUnlogged(entries: [Self.entry(3, "/a", "3")])
        #expect(try s.get("/a") == n("3"))
    }

    @Test func dropsTheRowsOfAnEarlierLogAndRestartsFromTheAppliedIndex() async throws {
        let dir = tempDir()
        do {
            // A member that kept a log (a voter demoted to learner): its rows go, the log starts
            // after the applied index.
            let s = try openStore(dir)
            try await s.appendAndApply(entries: (1...30).map { Self.entry(UInt64($0), "/k", "\($0)") }, through: 30)
            #expect(try Self.logRows(s) == 30)
            try await s.applyUnlogged(entries: (31...35).map { Self.entry(UInt64($0), "/k", "\($0)") })
            #expect(try Self.logRows(s) == 0 && s.firstLogIndex == 36)
        }
        let s = try openStore(dir)
        #expect(s.appliedIndex == 35 && s.lastLogIndex == 35 && s.firstLogIndex == 36)
        #expect(try s.get("/k") == n("35"))
        try await s.applyUnlogged(entries: [Self.entry(36, "/k", "36")])
        #expect(try s.get("/k") == n("36"))
    }

    @Test func batchesLikeAnyApply() async throws {
        var o = smallOptions()
        o.maxBatchEntries = 8
        let s = try openStore(tempDir(), o)
        let before = s.metrics.commits
        let results = try await s.applyUnlogged(entries: (1...20).map { Self.entry(UInt64($0), "/b/\($0)", "\($0)") })
        #expect(results.count == 20 && s.appliedIndex == 20)
        #expect(s.metrics.commits - before >= 3)  // 8 + 8 + 4: the dirty pages stay bounded
        #expect(try Self.logRows(s) == 0)
    }
}
