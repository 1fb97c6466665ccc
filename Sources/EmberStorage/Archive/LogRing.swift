import CLMDB
import EmberCore

/// The log rows of a single node that archives (`StoreOptions.alternatingLog`), in a ring of
/// small tables (`Tables.logRing`: `log`, `log2`, … `log32`). Batches append to the current
/// table; the tables before it, from the oldest, hold the older rows in index order. A table
/// goes whole once the archive holds every row of it (or they are past the hold): emptied in
/// the batch's transaction (`mdb_drop`: no row deleted one by one, no leaf copied).
///
/// Why a ring of small tables and not one log: a batch's appends copy, besides the pages its
/// rows fill, one page per level of the table's right edge (the last leaf, each branch above
/// it, the root). The rows wait for an archive mark (one per 16 MiB segment: ~220,000 small
/// entries), and a table that size has three levels; the current table turns once it has
/// `StoreOptions.logTurnLeafPages` leaves, so it keeps two (a page less per commit). Two
/// tables taking turns at each mark (the former `LogPair`, whose key and slots this keeps)
/// grew as large as a segment.
///
/// The position (current and oldest table) is in meta (`stateKey`), written in the
/// transaction that turns or drops a table — never per commit — so it always agrees with the
/// rows. Readers check that indexes follow each other (`EmberStore.appendEncodedEntries`): rows
/// left by a run in another mode (a cluster member, `--log-retain`) are not read as entries
/// they are not, and go when their table's turn to be dropped comes.
enum LogRing {
    /// The ring's position: the current table's slot and the oldest's, 8 bytes each.
    static let stateKey = "logRing"
    /// The two-table layout's current table (1: `log2`), read when `stateKey` is absent.
    static let pairKey = "logPair/current"
    /// Tables in the ring. Enough for a segment of small entries at two levels each (~9,000
    /// rows of ~70 bytes per table); when every one holds unarchived rows the current table
    /// just grows (a level more, as the pair did).
    static let tableCount = 32

    static func tableName(_ slot: Int) -> String { slot == 0 ? "log" : "log\(slot + 1)" }

    struct Position: Equatable {
        var current: Int
        var oldest: Int
    }

    static func position(_ tables: Tables, _ t: Txn) throws -> Position {
        let n = tables.logRing.count
        if let v = try t.get(tables.meta, Array(stateKey.utf8)), v.count == 16 {
            var r = ByteReader(v)
            let (c, o) = (try r.u64(), try r.u64())
            if c < n && o < n { return Position(current: Int(c), oldest: Int(o)) }
        }
        // Not written yet (a new directory, one of the pair's layout, after `reset`): the pair's
        // current table, and the first table after it that holds rows as the oldest.
        let current = try tables.metaU64(t, pairKey) == 1 ? 1 : 0
        for step in 1..<n {
            let slot = (current + step) % n
            if try lastIndex(t, tables.logRing[slot]) != nil { return Position(current: current, oldest: slot) }
        }
        return Position(current: current, oldest: current)
    }

    static func save(_ tables: Tables, _ t: Txn, _ p: Position) throws {
        var w = ByteWriter(capacity: 16)
        w.u64(UInt64(p.current))
        w.u64(UInt64(p.oldest))
        try t.put(tables.meta, Array(stateKey.utf8), w.bytes)
        try t.delete(tables.meta, Array(pairKey.utf8))
    }

    /// The slots from the oldest table to the current one, in index order.
    static func slots(_ p: Position, count n: Int) -> [Int] {
        var out = [p.oldest]
        var s = p.oldest
        while s != p.current {
            s = (s + 1) % n
            out.append(s)
        }
        return out
    }

    /// The table batches append to.
    static func current(_ tables: Tables, _ t: Txn) throws -> MDB_dbi {
        tables.logRing[try position(tables, t).current]
    }

    /// The log's tables in index order: the oldest first (the log alone unless `ring`).
    static func readOrder(_ tables: Tables, _ t: Txn, ring: Bool) throws -> [MDB_dbi] {
        guard ring else { return [tables.log] }
        return slots(try position(tables, t), count: tables.logRing.count).map { tables.logRing[$0] }
    }

    /// Empties the tables before the current one, oldest first, while every row of one is at
    /// or below `upTo`; then turns to the next table when the current one has `turnLeafPages`
    /// leaves, or is the only one left with rows (so the next mark can drop it) — if the next
    /// one is empty (when every table holds rows, the current one grows). Returns the log's
    /// first index afterwards (`applied` + 1 when it holds none) and the rows dropped.
    static func compact(_ tables: Tables, _ t: Txn, upTo: UInt64, applied: UInt64,
                        turnLeafPages: Int) throws -> (first: UInt64, dropped: Int) {
        let n = tables.logRing.count
        let start = try position(tables, t)
        var p = start
        var dropped = 0
        while p.oldest != p.current {
            let dbi = tables.logRing[p.oldest]
            if let last = try lastIndex(t, dbi) {
                guard last <= upTo else { break }
                dropped += try drop(t, dbi)
            }
            p.oldest = (p.oldest + 1) % n
        }
        var s = MDB_stat()
        try check(mdb_stat(t.ptr, tables.logRing[p.current], &s))
        let next = (p.current + 1) % n
        if s.ms_entries > 0 && (p.oldest == p.current || (s.ms_leaf_pages >= turnLeafPages && next != p.oldest)),
           try lastIndex(t, tables.logRing[next]) == nil {
            p.current = next
        }
        if p != start { try save(tables, t, p) }
        let first = try firstIndex(t, tables.logRing[p.oldest]) ?? firstIndex(t, tables.logRing[p.current]) ?? applied + 1
        return (first, dropped)
    }

    /// Empties `dbi`; returns the rows it held.
    private static func drop(_ t: Txn, _ dbi: MDB_dbi) throws -> Int {
        var s = MDB_stat()
        try check(mdb_stat(t.ptr, dbi, &s))
        // An online defrag catches the copy up by keys: note them (only while it runs)
        // instead of giving it up as a replaced table does (`Txn.drop`).
        if let changes = t.changes {
            try t.scan(dbi, prefix: []) { k, _ in changes.note(dbi, k); return true }
        }
        try check(mdb_drop(t.ptr, dbi, 0))
        return s.ms_entries
    }

    /// Empties every table of the ring (an import fills `log`, the current one, again: `StagingImport`).
    static func reset(_ tables: Tables, _ t: Txn) throws {
        for dbi in tables.logRing { try check(mdb_drop(t.ptr, dbi, 0)) }
        _ = try t.delete(tables.meta, Array(stateKey.utf8))
        _ = try t.delete(tables.meta, Array(pairKey.utf8))
    }

    /// A log table's name, for figures (`EmberStore.logTableShapes`).
    static func name(_ tables: Tables, _ dbi: MDB_dbi) -> String {
        tables.logRing.firstIndex(of: dbi).map(tableName) ?? "log"
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
