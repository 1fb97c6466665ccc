import EmberCore
import EmberTestSupport
import Foundation
import Testing
@testable import EmberStorage

/// The groups an `advance` entry refreshes are pruned by one walk of `trigrec`
/// (`TriggerChangeLog.prune(_:_:_:)`). Checked against a model of what a walk per stream
/// deletes: each stream's own rows after its `after` through its `through` that no hold
/// covers, the first `limit` of them in log order; the walk reports the newest one deleted and,
/// at the limit, the index before the first one left. Tables of interleaved streams (two
/// namespaces, groups that share their 8 bytes across namespaces), random holds and limits.
@Suite(.printsSeedOnFailure) struct TriggerPruneWalkTests {
    struct Row: Hashable {
        var index: UInt64
        var stream: [UInt8]
    }

    /// A full record's header whose counts name its row (`records` = index, `bytes` = index·10).
    static func header(_ index: UInt64) -> [UInt8] {
        TriggerChangeLog.header(TriggerChangeLog.Position(index: index, records: index, bytes: index * 10, events: index * 2))
    }

    static func rows(_ s: EmberStore) throws -> Set<Row> {
        try s.withRead { t in
            var out: Set<Row> = []
            try t.scan(s.tables.trigrec, prefix: [], startingAt: TriggerRecordRows.firstRecord) { k, _ in
                out.insert(Row(index: TriggerRecordRows.index(of: k), stream: Array(k[8...])))
                return true
            }
            return out
        }
    }

    /// What a walk per stream deletes, and its results.
    static func model(_ rows: Set<Row>, _ w: TriggerChangeLog.PruneStream) -> (deleted: Set<Row>, newest: UInt64?, stoppedAt: UInt64?) {
        let own = rows.filter { $0.stream == w.stream && $0.index > w.after && $0.index <= w.through }
            .filter { r in !w.holds.contains { r.index > $0.0 && r.index <= $0.1 } }
            .sorted { $0.index < $1.index }
        let deleted = Array(own.prefix(w.limit))
        // A hold reaching `through` ends the walk before any row past it: none of those is
        // deleted, and a stop at the limit is reported only for a row the walk reached.
        let stopped = own.count > w.limit ? own[w.limit].index - 1 : nil
        return (Set(deleted), deleted.last?.index, stopped)
    }

    @Test func oneWalkDeletesWhatAWalkPerStreamDeletes() async throws {
        var rng = TestSeed.generator(0x9e7a_11)
        for round in 0..<60 {
            let s = try openStore()
            defer { s.close() }
            // Streams: groups 1...4 in namespace "a", 1...2 in "bb" (same group bytes, other namespace).
            let streams = (1...4).map { TriggerRecordRows.stream("a", UInt64($0)) } + (1...2).map { TriggerRecordRows.stream("bb", UInt64($0)) }
            var table: Set<Row> = []
            for i in UInt64(1)...UInt64(200) {
                for st in streams where rng.chance(0.45) { table.insert(Row(index: i, stream: st)) }
            }
            let put = table
            try await s.perform { w in
                try w.writeTxn { t in
                    for r in put {
                        try t.put(w.tables.trigrec, TriggerRecordRows.key(r.index, r.stream), Self.header(r.index))
                    }
                }
            }
            // A random walk for a random subset of the streams.
            var walks: [TriggerChangeLog.PruneStream] = []
            for st in streams where rng.chance(0.7) {
                let after = UInt64(rng.below(120))
                let through = after + UInt64(rng.below(100))
                var holds: [(UInt64, UInt64)] = []
                var at = after
                while holds.count < 3 && rng.chance(0.6) {
                    let start = at + UInt64(rng.below(40))
                    let end = rng.chance(0.3) ? UInt64.max : start + 1 + UInt64(rng.below(30))
                    holds.append((start, end))
                    if end == .max { break }
                    at = end + 1
                }
                let limit = rng.chance(0.5) ? Int.max : 1 + rng.below(12)
                walks.append(TriggerChangeLog.PruneStream(stream: st, after: after, through: through, holds: holds, limit: limit))
            }
            let expected = walks.map { Self.model(table, $0) }
            let ws = walks
            walks = try await s.perform { w in
                var ws = ws
                try w.writeTxn { t in try TriggerChangeLog.prune(w.tables, t, &ws) }
                return ws
            }
            var left = table
            for (k, e) in expected.enumerated() {
                left.subtract(e.deleted)
                #expect(walks[k].newest?.index == e.newest, "round \(round) stream \(k): newest")
                if let n = e.newest { #expect(walks[k].newest?.records == n && walks[k].newest?.bytes == n * 10, "round \(round): counts of \(n)") }
                #expect(walks[k].stoppedAt == e.stoppedAt, "round \(round) stream \(k): stopped at")
            }
            #expect(try Self.rows(s) == left, "round \(round): the rows left")
        }
    }
}
