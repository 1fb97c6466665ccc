import CLMDB
import EmberCore
import Foundation
import Testing
import EmberTestSupport
@testable import EmberStorage

/// Tables rewritten with full pages (`DenseCopy`): the same rows, in far fewer pages than LMDB's
/// half-page splits leave.
@Suite(.printsSeedOnFailure) struct DenseCopyTests {
    /// Bytes of the rows (LMDB's node header and slot included) per byte of leaf pages.
    static func fill(_ t: Txn, _ dbi: MDB_dbi) throws -> Double {
        var st = MDB_stat()
        try check(mdb_stat(t.ptr, dbi, &st))
        var bytes = 0
        let c = try t.cursor(dbi)
        defer { c.close() }
        var row = try c.first()
        while let (k, v) = row {
            bytes += 8 + 2 + k.count + v.count
            row = try c.next()
        }
        return Double(bytes) / Double(max(1, Int(st.ms_leaf_pages)) * (Int(st.ms_psize) - 16))
    }

    static func rows(_ t: Txn, _ dbi: MDB_dbi) throws -> [[UInt8]] {
        var out: [[UInt8]] = []
        try t.scan(dbi, prefix: []) { k, v in out.append(k + [0xFF] + v); return true }
        return out
    }

    /// Rows put in random order, then a third deleted: about half-full pages; rewritten: full.
    @Test func rewriteFillsThePagesOfATableInPlace() async throws {
        let s = try openStore()
        defer { s.close() }
        let (before, after, same) = try await s.perform { w in
            try w.writeTxn { t -> (Double, Double, Bool) in
                var dbi: MDB_dbi = 0
                try check(mdb_dbi_open(t.ptr, "dense-test", flag(MDB_CREATE), &dbi))
                var g = TestSeed.generator(7)
                for i in (0..<30_000).shuffled(using: &g) {
                    try t.put(dbi, Array(String(format: "key%08d", i).utf8), Array(repeating: UInt8(i & 0xFF), count: 20))
                }
                for i in stride(from: 0, to: 30_000, by: 3) { try t.delete(dbi, Array(String(format: "key%08d", i).utf8)) }
                let rows = try Self.rows(t, dbi)
                let before = try Self.fill(t, dbi)
                try DenseCopy.rewrite(t, dbi)
                return (before, try Self.fill(t, dbi), try Self.rows(t, dbi) == rows)
            }
        }
        #expect(same)
        #expect(before < 0.75, "random inserts and deletes: \(before)")
        #expect(after > 0.95, "rewritten: \(after)")
    }

    /// `compact` copies every table in key order: full pages, the same rows, the same answers.
    @Test func compactWritesFullPages() async throws {
        let dir = tempDir()
        do {
            let s = try openStore(dir)
            try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/items", indexes: ["score"])])
            var g = TestSeed.generator(3)
            for batch in 0..<20 {
                var kids: [(String, String)] = []
                var keys: Set<Int> = []
                while keys.count < 500 { keys.insert(Int.random(in: 0..<1_000_000, using: &g)) }
                for key in keys.sorted() {
                    kids.append((String(format: "c%06d", key),
                                 #"{"score": \#(Int.random(in: 0..<1000, using: &g)), "name": "n\#(batch)", "z": [1, 2]}"#))
                }
                try await s.update("/items", kids)
            }
            s.close()
        }
        let out = tempDir() + "/c"
        try EmberStore.compact(directory: dir, output: out)
        let a = try openStore(dir), b = try openStore(out)
        defer { a.close(); b.close() }
        #expect(try a.stateHash() == b.stateHash())
        #expect(try a.get("/items") == b.get("/items"))
        let spec = QuerySpec(index: .child(p("score")), limit: 5, limitFromStart: false)
        #expect(try a.query(namespace: "t", path: p("/items"), spec: spec).map(\.key) == b.query(namespace: "t", path: p("/items"), spec: spec).map(\.key))
        for (name, table) in [("tree", \Tables.tree), ("idx", \Tables.idx)] {
            let fa = try a.withRead { try Self.fill($0, a.tables[keyPath: table]) }
            let fb = try b.withRead { try Self.fill($0, b.tables[keyPath: table]) }
            #expect(fb > 0.95 && fb > fa, "\(name): \(fa) → \(fb)")
        }
    }
}
