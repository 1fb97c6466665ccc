import EmberCore
import Foundation
import Testing

@testable import EmberNodeStore
@testable import EmberStorage

/// A single node that archives keeps its log rows in two tables (`LogPair`): the older one goes
/// whole once archived or past the hold, and reads go across both in index order.
@Suite struct LogPairTests {
    static func options(hold: UInt64) -> StoreOptions {
        var o = StoreOptions()
        o.mapSize = 1 << 30
        o.logRetention = 0
        o.archiveHold = hold
        o.alternatingLog = true
        return o
    }

    static func rowCounts(_ store: EmberStore) throws -> (log: Int, log2: Int) {
        try store.withRead { t in
            var a = 0, b = 0
            try t.scan(store.tables.log, prefix: []) { _, _ in a += 1; return true }
            try t.scan(store.tables.log2, prefix: []) { _, _ in b += 1; return true }
            return (a, b)
        }
    }

    /// Without an archive writer the rows past the hold go a table at a time: the log keeps at
    /// least the hold and at most twice it, in both tables, read back in order from its first
    /// index; the tables take turns.
    @Test func rowsPastTheHoldGoATableAtATime() async throws {
        let store = try EmberStore(directory: NSTemporaryDirectory() + "ember-logpair-\(UUID().uuidString)", options: Self.options(hold: 20))
        defer { store.close() }
        var sawBoth = false, sawOnlyOne = false
        for i in 0..<100 {
            try await ArchiverTests.write(store, 1, "p\(i)-")
            let kept = store.appliedIndex - store.firstLogIndex + 1
            #expect(kept >= min(20, store.appliedIndex) && kept <= 40, "\(kept) entries kept at \(store.appliedIndex)")
            let rows = try Self.rowCounts(store)
            #expect(UInt64(rows.log + rows.log2) == kept, "\(rows) for \(kept) entries")
            if rows.log > 0 && rows.log2 > 0 { sawBoth = true }
            if store.appliedIndex > 20 && (rows.log == 0 || rows.log2 == 0) { sawOnlyOne = true }
        }
        #expect(sawBoth && sawOnlyOne, "the tables took turns")
        let held = try store.encodedEntries(from: store.firstLogIndex, through: 100, maxCount: 100)
        #expect(held.map(\.index) == Array(store.firstLogIndex...100))
        var builder = ArchiveSegmentBuilder()
        let n = try store.appendEncodedEntries(from: store.firstLogIndex, through: 100, maxCount: 1_000, into: &builder)
        #expect(n == held.count && builder.entries.map(\.bytes) == held.map(\.bytes))
        #expect(try store.encodedEntries(from: 1, through: store.firstLogIndex - 1, maxCount: 100).isEmpty)
    }

    /// An archive mark lets the older table go once it covers all of it (the rows of the current
    /// one stay, archived or not, until a later mark covers them); the entries kept stay
    /// readable across both tables. The first commit's row is the older table's own (the tables
    /// turn once the older one is empty and the current one has rows).
    @Test func aMarkPastTheOlderTableDropsIt() async throws {
        let store = try EmberStore(directory: NSTemporaryDirectory() + "ember-logpair-\(UUID().uuidString)", options: Self.options(hold: 1_000))
        defer { store.close() }
        try await ArchiverTests.write(store, 10, "a")  // 1 (older table), 2...10 (current)
        #expect(store.firstLogIndex == 1)
        _ = try await store.submit(namespace: Archiver.markNamespace, .archived(through: 5))  // 11: covers the older table
        #expect(store.firstLogIndex == 2)
        try await ArchiverTests.write(store, 3, "b")  // 12...14, the current table; 2...11 are not all archived
        #expect(store.firstLogIndex == 2)
        #expect(try Self.rowCounts(store).log + Self.rowCounts(store).log2 == 13)
        _ = try await store.submit(namespace: Archiver.markNamespace, .archived(through: 14))  // 15: covers 2...11
        #expect(store.firstLogIndex == 12)
        try await ArchiverTests.write(store, 1, "c")  // 16
        #expect(store.firstLogIndex == 12)
        #expect(try store.encodedEntries(from: 12, through: 16, maxCount: 100).map(\.index) == Array(12...16))
        #expect(try store.encodedEntries(from: 2, through: 16, maxCount: 100).isEmpty)
    }
}
