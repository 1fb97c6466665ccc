import CLMDB
import EmberCore
import Foundation
import Testing
import EmberTestSupport
@testable import EmberStorage

/// The key-only cursor reads (`Cursor.firstKey`, `lastKey`, `walkKeys`) the log's compaction and
/// `LogRing` use: the same keys, order and deletions as the copying `first`/`last`/`nextKey`.
@Suite struct CursorKeyWalkTests {
    static func keys(_ t: Txn, _ dbi: MDB_dbi) throws -> [UInt64] {
        var out: [UInt64] = []
        try t.scan(dbi, prefix: []) { k, _ in out.append(Writer.logIndex(k)!); return true }
        return out
    }

    @Test func firstLastAndAWalkThatDeletesSomeKeys() async throws {
        let s = try openStore()
        defer { s.close() }
        let (ends, empty, seen, deleted, left) = try await s.perform { w in
            try w.writeTxn { t -> ((UInt64?, UInt64?), (UInt64??, UInt64??), [UInt64], [UInt64], [UInt64]) in
                var dbi: MDB_dbi = 0
                try check(mdb_dbi_open(t.ptr, "key-walk-test", flag(MDB_CREATE), &dbi))
                var none: MDB_dbi = 0
                try check(mdb_dbi_open(t.ptr, "key-walk-empty", flag(MDB_CREATE), &none))
                for i in stride(from: UInt64(10), through: 200, by: 10) { try t.put(dbi, Writer.logKey(i), Array(repeating: 7, count: 100)) }
                let c = try t.cursor(dbi)
                defer { c.close() }
                let ends = (try c.firstKey(Writer.logIndex) ?? nil, try c.lastKey(Writer.logIndex) ?? nil)
                let e = try t.cursor(none)
                defer { e.close() }
                let empty = (try e.firstKey(Writer.logIndex), try e.lastKey(Writer.logIndex))
                // From 35 (between keys): delete every other key, stop past 150.
                var seen: [UInt64] = [], deleted: [UInt64] = []
                try c.walkKeys(from: Writer.logKey(35)) { key in
                    let i = Writer.logIndex(key)!
                    guard i <= 150 else { return .stop }
                    seen.append(i)
                    if (i / 10) % 2 == 0 { deleted.append(i); return .delete }
                    return .next
                }
                return (ends, empty, seen, deleted, try Self.keys(t, dbi))
            }
        }
        #expect(ends.0 == 10 && ends.1 == 200)
        #expect(empty.0 == nil && empty.1 == nil)
        // After each delete the walk goes on with the key that followed: none skipped.
        #expect(seen == Array(stride(from: UInt64(40), through: 150, by: 10)))
        #expect(deleted == [40, 60, 80, 100, 120, 140])
        #expect(left == Array(stride(from: UInt64(10), through: 200, by: 10)).filter { !deleted.contains($0) })
    }
}
