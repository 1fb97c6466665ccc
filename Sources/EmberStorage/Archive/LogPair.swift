import CLMDB

/// The log rows of a single node that archives, in two tables (`StoreOptions.alternatingLog`):
/// batches append to the current one; once the archive holds every row of the other (or they
/// are past the hold), that one is emptied whole in the batch's transaction (`mdb_drop`: its
/// pages freed from the branch pages, no row deleted one by one, no leaf copied) and becomes
/// the current one. At saturation a row was otherwise deleted, its leaf copied and rebalanced,
/// for every write: now a table goes per archive mark (one per 16 MiB segment).
///
/// Which table is current is in meta (`currentKey`: 1 for `log2`), written in the transaction
/// that swaps, so it always agrees with the rows. The other table's rows come first in index
/// order. Readers check that indexes follow each other (`EmberStore.appendEncodedEntries`): rows
/// left in `log2` by a run in another mode (a cluster member, `--log-retain`) are not read as
/// entries they are not, and go at the next swap.
enum LogPair {
    static let currentKey = "logPair/current"

    /// The table batches append to, and the other one (older rows), as `t` holds them.
    static func roles(_ tables: Tables, _ t: Txn) throws -> (current: MDB_dbi, older: MDB_dbi) {
        try tables.metaU64(t, currentKey) == 1 ? (tables.log2, tables.log) : (tables.log, tables.log2)
    }

    /// The log's tables in index order: the older one first (the log alone unless `pair`).
    static func readOrder(_ tables: Tables, _ t: Txn, pair: Bool) throws -> [MDB_dbi] {
        guard pair else { return [tables.log] }
        let r = try roles(tables, t)
        return [r.older, r.current]
    }

    /// Empties the older table when every row of it is at or below `upTo` (or it is empty), and
    /// makes it current when the current one has rows. Returns the log's first index afterwards
    /// (`applied` + 1 when it holds none) and the rows dropped.
    static func compact(_ tables: Tables, _ t: Txn, upTo: UInt64, applied: UInt64) throws -> (first: UInt64, dropped: Int) {
        var (current, older) = try roles(tables, t)
        var dropped = 0
        let olderLast = try lastIndex(t, older)
        if olderLast.map({ $0 <= upTo }) ?? true {
            if olderLast != nil {
                var s = MDB_stat()
                try check(mdb_stat(t.ptr, older, &s))
                dropped = Int(s.ms_entries)
                // An online defrag catches the copy up by keys: note them (only while it runs)
                // instead of giving it up as a replaced table does (`Txn.drop`).
                if let changes = t.changes {
                    try t.scan(older, prefix: []) { k, _ in changes.note(older, k); return true }
                }
                try check(mdb_drop(t.ptr, older, 0))
            }
            if try lastIndex(t, current) != nil {
                try tables.putMetaU64(t, currentKey, older == tables.log2 ? 1 : 0)
                (current, older) = (older, current)
            }
        }
        let first = try firstIndex(t, older) ?? firstIndex(t, current) ?? applied + 1
        return (first, dropped)
    }

    /// Empties both tables (an import fills `log`, the current one, again: `StagingImport`).
    static func reset(_ tables: Tables, _ t: Txn) throws {
        try check(mdb_drop(t.ptr, tables.log, 0))
        try check(mdb_drop(t.ptr, tables.log2, 0))
        _ = try t.delete(tables.meta, Array(currentKey.utf8))
    }

    /// The first or last row's index in `dbi`, its key read in place.
    static func firstIndex(_ t: Txn, _ dbi: MDB_dbi) throws -> UInt64? {
        let c = try t.cursor(dbi)
        defer { c.close() }
        return try c.firstKey(Writer.logIndex) ?? nil
    }

    static func lastIndex(_ t: Txn, _ dbi: MDB_dbi) throws -> UInt64? {
        let c = try t.cursor(dbi)
        defer { c.close() }
        return try c.lastKey(Writer.logIndex) ?? nil
    }
}
