import CLMDB
import EmberCore
import EmberTestSupport
import Foundation
import Testing
@testable import EmberStorage

/// Storage format 7 (`TriggerRecordRows`: the shared change records in `trigrec`, keyed by log
/// index first) over a directory of format 6, whose records sit in `meta` under
/// `triggers/r/<ns>\0<group><index>`: opening it moves them, and every trigger then reads the
/// same events with the same ids, in log order, as a store that never held the older layout,
/// before and after a cursor moves through them and later writes append behind them.
@Suite(.printsSeedOnFailure) struct TriggerRecordTableUpgradeTests {
    typealias C = TriggerCompactRecordTests
    typealias C2 = TriggerRecordUpgradeTests

    /// Moves `s`'s records to format 6's layout in `meta`, as stored (compact ones compact),
    /// and empties the table and the heads: what a build of format 6 left.
    static func moveToFormat6(_ s: EmberStore) async throws -> Int {
        try await s.perform { w in
            try w.writeTxn { t in
                var rows: [([UInt8], [UInt8])] = []
                try TriggerRecordRows.legacyRows(w.tables, t, full: { _, _, v in v }) { k, v in rows.append((k, v)) }
                for (k, v) in rows { try t.put(w.tables.meta, k, v) }
                try t.drop(w.tables.trigrec, delete: false)
                try t.deletePrefix(w.tables.meta, TriggerRecordRows.headPrefix)
                return rows.count
            }
        }
    }

    @Test func recordsOfFormat6AreMovedAndDeliveredInOrderWithTheirIdsAfterTheUpgrade() async throws {
        var g = TestSeed.generator(0x07_7ab1)
        let entries = C.entries(C.history(&g))
        let dir = tempDir()
        var a = try openStore(dir)
        let b = try openStore(tempDir())
        defer { b.close() }
        func apply(_ batch: ArraySlice<LogEntry>) async throws {
            let ra = try await a.appendAndApply(entries: Array(batch), through: batch.last!.index)
            let rb = try await b.appendAndApply(entries: Array(batch), through: batch.last!.index)
            #expect(ra.map(\.outcome) == rb.map(\.outcome) && ra.map(\.triggerReach) == rb.map(\.triggerReach))
        }
        func applyInBatches(_ items: ArraySlice<LogEntry>) async throws {
            var i = items.startIndex
            while i < items.endIndex {
                let n = min(items.endIndex - i, Int.random(in: 1...40, using: &g))
                try await apply(items[i..<(i + n)])
                i += n
            }
        }
        let half = entries.count / 2
        try await applyInBatches(entries[0..<half])
        let before = try C.records(a)

        // The older build's directory: its records in `meta`, its mark.
        let moved = try await Self.moveToFormat6(a)
        #expect(moved > 10 && moved == before.count)
        a.close()
        try StorageFormatTests.setMark(dir, 6)
        a = try openStore(dir)
        defer { a.close() }
        #expect(try StorageFormatTests.mark(dir) == UInt64(BuildInfo.storageFormat))
        // Moved, as they were (compact ones still compact), and none left in `meta`.
        #expect(try C.records(a) == before)
        let leftInMeta = try a.withRead { t in try t.hasPrefix(a.tables.meta, TriggerChangeLog.recordRows) }
        #expect(!leftInMeta)

        try C2.expectSameReads(a, b, "after the upgrade")
        // A cursor through half the moved records: those go, the rest are read as before.
        let (advance, rest, expected) = try C2.madeHalfway(a, entries, half: half)
        try await apply([advance][...])
        #expect(try a.triggerOutbox(namespace: "t", trigger: "made", after: nil, limit: 10_000).map(\.index) == expected)
        try await applyInBatches(rest[...])
        try C2.expectSameReads(a, b, "after later writes")
        // The same rows as the store that never had the older layout, heads included.
        #expect(try C.records(a) == C.records(b))
        try a.withRead { ta in
            try b.withRead { tb in
                var ha: Set<[UInt8]> = [], hb: Set<[UInt8]> = []
                try ta.scan(a.tables.meta, prefix: TriggerRecordRows.headPrefix) { k, _ in ha.insert(k); return true }
                try tb.scan(b.tables.meta, prefix: TriggerRecordRows.headPrefix) { k, _ in hb.insert(k); return true }
                #expect(!ha.isEmpty && ha == hb)
                // Their newest positions (how far pruning walked is each store's own), each its
                // newest record's (heads are written once per batch).
                var newest: [[UInt8]: TriggerChangeLog.Position] = [:]
                try ta.scan(a.tables.trigrec, prefix: []) { k, v in
                    newest[Array(k[8...])] = try TriggerChangeLog.position(TriggerRecordRows.index(of: k), v)
                    return true
                }
                for (stream, last) in newest {
                    #expect(try TriggerRecordRows.head(a.tables, ta, stream)?.last == last)
                }
                for k in ha {
                    let stream = Array(k[TriggerRecordRows.headPrefix.count...])
                    let last = try #require(try TriggerRecordRows.head(a.tables, ta, stream)).last
                    #expect(try TriggerRecordRows.head(b.tables, tb, stream)?.last == last)
                }
            }
        }
    }
}
