import CLMDB
import Foundation

/// Table copies that leave every B-tree page full. LMDB splits a full page in half unless rows
/// are put with MDB_APPEND, so a table filled in key order without it, filled at random, or
/// thinned by deletes sits at roughly half-full pages — and its compacting copy
/// (`mdb_env_copy2`) keeps the pages as they are. Rows put in key order with MDB_APPEND fill
/// each page before the next one starts: for the 1M-children footprint set, a snapshot install
/// or a `compact` after rewriting objects inline takes ~2/3 of the pages it took without.
enum DenseCopy {
    /// Rows per write transaction of a copy into a new environment (bounds its dirty pages).
    static let rowsPerTransaction = 100_000
    /// The table `rewrite` stages rows in (dropped before its transaction ends).
    static let scratchTable = "dense-scratch"

    /// Names of the named tables of the environment `t` belongs to.
    static func tableNames(_ t: Txn) throws -> [String] {
        var main: MDB_dbi = 0
        try check(mdb_dbi_open(t.ptr, nil, 0, &main))
        var names: [String] = []
        try t.scan(main, prefix: []) { k, _ in names.append(String(decoding: k, as: UTF8.self)); return true }
        return names
    }

    /// Copies every table of the environment `source` (open, possibly read-only) into a new
    /// environment in `target` (a directory without a data file), each table in key order
    /// with MDB_APPEND, in transactions of `rowsPerTransaction` rows, synced once at the end.
    static func copy(_ source: OpaquePointer, into target: String, mapSize: Int) throws {
        // One sync at the end instead of one per transaction: a copy cut short is thrown away.
        let e = try openEnvironment(target, mapSize: mapSize, flags: flag(MDB_NOSYNC))
        defer { mdb_env_close(e) }
        var r: OpaquePointer?
        try check(mdb_txn_begin(source, nil, flag(MDB_RDONLY), &r))
        defer { mdb_txn_abort(r) }
        try copy(from: Txn(ptr: r!), into: e)
        try check(mdb_env_sync(e, 1))
    }

    /// Copies every table the read transaction `read` sees into the empty environment `e`
    /// (opened `MDB_NOSYNC`; the caller syncs), as `copy` above. Returns the rows copied.
    @discardableResult
    static func copy(from read: Txn, into e: OpaquePointer) throws -> Int {
        var total = 0
        for name in try tableNames(read) {
            var from: MDB_dbi = 0
            try check(mdb_dbi_open(read.ptr, name, 0, &from))
            var w: OpaquePointer?
            try check(mdb_txn_begin(e, nil, 0, &w))
            var to: MDB_dbi = 0
            var rows = 0
            do {
                try check(mdb_dbi_open(w, name, flag(MDB_CREATE), &to))
                let c = try read.cursor(from)
                defer { c.close() }
                var row = try c.first()
                while let (k, v) = row {
                    try Txn(ptr: w!).put(to, k, v, flags: flag(MDB_APPEND))
                    rows += 1
                    if rows % rowsPerTransaction == 0 {
                        let full = w
                        w = nil
                        try check(mdb_txn_commit(full))
                        try check(mdb_txn_begin(e, nil, 0, &w))
                    }
                    row = try c.next()
                }
            } catch {
                if w != nil { mdb_txn_abort(w) }
                throw error
            }
            try check(mdb_txn_commit(w))
            total += rows
        }
        return total
    }

    /// Rewrites the table `dbi` with full pages inside the write transaction `t`: its rows go to
    /// a scratch table and back, both in key order with MDB_APPEND, each row deleted where it
    /// was as it moves. Pages this transaction wrote and emptied are reused by it at once (LMDB's
    /// loose pages; a dropped table's pages would only be free for later transactions), so a
    /// rewrite right after a snapshot install does not grow the file by the table's size twice.
    static func rewrite(_ t: Txn, _ dbi: MDB_dbi) throws {
        var scratch: MDB_dbi = 0
        try check(mdb_dbi_open(t.ptr, scratchTable, flag(MDB_CREATE), &scratch))
        try t.drop(scratch, delete: false)
        try move(t, from: dbi, to: scratch)
        try move(t, from: scratch, to: dbi)
        try t.drop(scratch, delete: true)
    }

    /// Moves every row of `from` into the empty table `to`, in key order.
    private static func move(_ t: Txn, from: MDB_dbi, to: MDB_dbi) throws {
        let c = try t.cursor(from)
        defer { c.close() }
        var row = try c.first()
        while let (k, v) = row {
            try t.put(to, k, v, flags: flag(MDB_APPEND))
            try c.deleteCurrent()
            // After a delete the cursor rests on the following row; MDB_NEXT returns it.
            row = try c.next()
        }
    }

    /// Puts rows arriving mostly in key order: with MDB_APPEND (full pages) while each key is
    /// above the table's last one, plainly otherwise.
    struct OrderedPuts {
        private var last: [MDB_dbi: [UInt8]] = [:]

        mutating func put(_ t: Txn, _ dbi: MDB_dbi, _ k: [UInt8], _ v: [UInt8]) throws {
            if let l = last[dbi], !bytesLess(l, k) {
                try t.put(dbi, k, v)
                return
            }
            try t.put(dbi, k, v, flags: flag(MDB_APPEND))
            last[dbi] = k
        }
    }
}
