import EmberTestSupport
import CLMDB
import EmberCore
import Foundation
import Testing

@testable import EmberNodeStore
@testable import EmberStorage

/// A single node that archives keeps its log rows in a ring of small tables (`LogRing`): the
/// oldest ones go whole once archived or past the hold, and reads go across them in index order.
@Suite struct LogRingTests {
    static func options(hold: UInt64, turnLeafPages: Int = StoreOptions().logTurnLeafPages) -> StoreOptions {
        var o = StoreOptions()
        o.mapSize = 1 << 30
        o.logRetention = 0
        o.archiveHold = hold
        o.alternatingLog = true
        o.logTurnLeafPages = turnLeafPages
        return o
    }

    /// A store in a directory of its own (`remove` closes it and deletes the directory).
    static func store(_ options: StoreOptions) throws -> EmberStore {
        try EmberStore(directory: TestDirectory.root + "ember-logring-\(UUID().uuidString)", options: options)
    }

    static func remove(_ store: EmberStore) {
        store.close()
        try? FileManager.default.removeItem(atPath: store.directory)
    }

    /// Rows per ring table, by slot.
    static func ringRows(_ store: EmberStore) throws -> [Int] {
        try store.withRead { t in
            try store.tables.logRing.map { dbi in
                var s = MDB_stat()
                try check(mdb_stat(t.ptr, dbi, &s))
                return s.ms_entries
            }
        }
    }


    /// Without an archive writer the rows past the hold go a table at a time: the log keeps at
    /// least the hold and at most twice it, in one or two tables, read back in order from its
    /// first index; the tables take turns.
    @Test func rowsPastTheHoldGoATableAtATime() async throws {
        let store = try Self.store(Self.options(hold: 20))
        defer { Self.remove(store) }
        var sawBoth = false, sawOnlyOne = false
        for i in 0..<100 {
            try await ArchiverTests.write(store, 1, "p\(i)-")
            let kept = store.appliedIndex - store.firstLogIndex + 1
            #expect(kept >= min(20, store.appliedIndex) && kept <= 40, "\(kept) entries kept at \(store.appliedIndex)")
            let rows = try Self.ringRows(store).filter { $0 > 0 }
            #expect(UInt64(rows.reduce(0, +)) == kept && rows.count <= 2, "\(rows) for \(kept) entries")
            if rows.count == 2 { sawBoth = true }
            if store.appliedIndex > 20 && rows.count == 1 { sawOnlyOne = true }
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
        let store = try Self.store(Self.options(hold: 1_000))
        defer { Self.remove(store) }
        try await ArchiverTests.write(store, 10, "a")  // 1 (older table), 2...10 (current)
        #expect(store.firstLogIndex == 1)
        _ = try await store.submit(namespace: Archiver.markNamespace, .archived(through: 5))  // 11: covers the older table
        #expect(store.firstLogIndex == 2)
        try await ArchiverTests.write(store, 3, "b")  // 12...14, the current table; 2...11 are not all archived
        #expect(store.firstLogIndex == 2)
        #expect(try Self.ringRows(store).reduce(0, +) == 13)
        _ = try await store.submit(namespace: Archiver.markNamespace, .archived(through: 14))  // 15: covers 2...11
        #expect(store.firstLogIndex == 12)
        try await ArchiverTests.write(store, 1, "c")  // 16
        #expect(store.firstLogIndex == 12)
        #expect(try store.encodedEntries(from: 12, through: 16, maxCount: 100).map(\.index) == Array(12...16))
        #expect(try store.encodedEntries(from: 2, through: 16, maxCount: 100).isEmpty)
    }
}

extension LogRingTests {
    /// Without syncs: these check which table rows land in, over many commits.
    static func unsynced(turnLeafPages: Int) -> StoreOptions {
        var o = options(hold: 1_000_000, turnLeafPages: turnLeafPages)
        o.durable = false
        return o
    }

    /// The current table turns at `logTurnLeafPages` leaves: every table keeps two levels, the
    /// entries stay readable in order across all of them, and a mark drops the tables it covers
    /// whole, oldest first, never one holding a row it does not cover.
    @Test func aFullTableTurnsAndMarksDropWholeTables() async throws {
        let store = try Self.store(Self.unsynced(turnLeafPages: 2))
        defer { Self.remove(store) }
        // Small rows (~70 a page): a table turns every ~100-140 rows.
        try await ArchiverTests.write(store, 1_000, "r")
        let shapes = try store.logTableShapes()
        #expect(shapes.count > 3, "\(shapes)")
        #expect(shapes.allSatisfy { $0.depth <= 2 }, "\(shapes)")
        #expect(shapes.reduce(0) { $0 + $1.rows } == 1_000)
        #expect(try store.encodedEntries(from: 1, through: 1_000, maxCount: 2_000).map(\.index) == Array(1...1_000))
        var builder = ArchiveSegmentBuilder()
        #expect(try store.appendEncodedEntries(from: 1, through: 1_000, maxCount: 2_000, into: &builder) == 1_000)

        _ = try await store.submit(namespace: Archiver.markNamespace, .archived(through: 500))  // 1001
        let first = store.firstLogIndex
        #expect(first > 1 && first <= 501, "first \(first)")
        // What is left is whole tables: the oldest left starts at `first` and was not covered
        // entirely by the mark; everything from it on is still there, in order.
        let kept = try store.encodedEntries(from: first, through: 1_001, maxCount: 2_000).map(\.index)
        #expect(kept == Array(first...1_001))
        #expect(try store.logTableShapes().reduce(0) { $0 + $1.rows } == kept.count)
        #expect(try store.encodedEntries(from: 1, through: first - 1, maxCount: 10).isEmpty)
    }

    /// Every commit rewrites the main table's pages that hold the changed tables' records:
    /// with the ring's 32 names those must still fit one page (a second level would cost every
    /// store, archiving or not, a page per commit).
    @Test func theRingsNamesFitOneMainPage() async throws {
        let store = try Self.store(Self.options(hold: 1_000))
        defer { Self.remove(store) }
        try await ArchiverTests.write(store, 3, "a")
        let (depth, names) = try store.withRead { t in
            var s = MDB_stat()
            try check(mdb_stat(t.ptr, 1, &s))  // MAIN_DBI: one record per named table
            return (s.ms_depth, s.ms_entries)
        }
        #expect(names >= LogRing.tableCount + 9 && depth == 1, "\(names) named tables, depth \(depth)")
    }

    /// When every table of the ring holds rows the archive lacks, the current one keeps them
    /// (it grows past the turn size): nothing is lost or reordered, and once a mark covers the
    /// older tables they go and the ring turns again.
    @Test func aFullRingGrowsTheCurrentTable() async throws {
        let store = try Self.store(Self.unsynced(turnLeafPages: 1))
        defer { Self.remove(store) }
        // A table turns at its first leaf: one commit's row each, until the ring is full.
        let n = LogRing.tableCount, total = UInt64(n + 40)
        try await ArchiverTests.write(store, Int(total), "r")
        let rows = try Self.ringRows(store)
        #expect(rows.allSatisfy { $0 > 0 } && rows.filter { $0 == 1 }.count == n - 1, "\(rows)")
        #expect(try store.encodedEntries(from: 1, through: total, maxCount: 10_000).map(\.index) == Array(1...total))
        #expect(store.firstLogIndex == 1)

        _ = try await store.submit(namespace: Archiver.markNamespace, .archived(through: total))
        try await ArchiverTests.write(store, 10, "late-")
        #expect(try Self.ringRows(store).filter { $0 > 0 }.count < n, "the covered tables went")
        let first = store.firstLogIndex
        #expect(first > 1)
        #expect(try store.encodedEntries(from: first, through: total + 11, maxCount: 10_000).map(\.index) == Array(first...(total + 11)))
    }

    /// A snapshot install (a Raft snapshot, a backup's restore) replaces the log with the state:
    /// every table of the ring goes, not only `log` (the others kept rows nobody reads and their
    /// pages for good), and the ring starts again at its first table.
    @Test func aSnapshotInstallEmptiesEveryTableOfTheRing() async throws {
        let store = try Self.store(Self.unsynced(turnLeafPages: 1))
        defer { Self.remove(store) }
        try await ArchiverTests.write(store, 40, "r")
        #expect(try Self.ringRows(store).filter { $0 > 0 }.count > 2, "rows in several tables before the install")

        let source = try Self.store(StoreOptions())
        defer { Self.remove(source) }
        try await ArchiverTests.write(source, 5, "s")
        var chunks: [[UInt8]] = []
        try source.snapshot { chunks.append($0) }
        try await store.installSnapshot(chunks: chunks)

        #expect(try Self.ringRows(store) == Array(repeating: 0, count: LogRing.tableCount))
        #expect(try store.withRead { t in try t.get(store.tables.meta, Array(LogRing.stateKey.utf8)) } == nil)
        #expect(store.appliedIndex == 5 && store.firstLogIndex == 6)
        // The ring goes on from its first table with the writes after the install.
        try await ArchiverTests.write(store, 3, "after")
        #expect(try store.encodedEntries(from: 6, through: 8, maxCount: 10).map(\.index) == [6, 7, 8])
        #expect(try store.read(namespace: "t", path: Path("/s4")).node.toJSON() == .int(4))
        #expect(try store.read(namespace: "t", path: Path("/r0")).node.isEmpty)
    }
}
