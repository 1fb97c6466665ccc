import CLMDB
import EmberCore

/// The replicated position of the point-in-time archive: the index through which the archive
/// holds every entry (meta `archive/through`, written by `.archived` entries). Raised only: a
/// mark below it (a deposed leader's late mark) changes nothing.
enum ArchiveMark {
    static let metaPrefix = Array("archive/".utf8)
    static let throughKey = "archive/through"

    static func through(_ tables: Tables, _ t: Txn) throws -> UInt64 {
        try tables.metaU64(t, throughKey)
    }

    static func record(_ tables: Tables, _ t: Txn, through index: UInt64) throws {
        if index > (try through(tables, t)) { try tables.putMetaU64(t, throughKey, index) }
    }
}

extension EmberStore {
    /// The index through which the archive holds every entry, as the replicated state says.
    public func archivedThrough() throws -> UInt64 {
        try withRead { t in try ArchiveMark.through(tables, t) }
    }

    /// The encoded log entries `from...through` (at most `maxCount`), as stored. Stops early at
    /// an entry the log no longer holds (compacted): the caller checks the first index.
    public func encodedEntries(from: UInt64, through: UInt64, maxCount: Int) throws -> [(index: UInt64, bytes: [UInt8])] {
        guard from <= through, maxCount > 0 else { return [] }
        return try withRead { t in
            var out: [(index: UInt64, bytes: [UInt8])] = []
            var expected = from
            // Each table from the next index on (`LogRing`: the oldest table's rows come first).
            for dbi in try LogRing.readOrder(tables, t, ring: options.alternatingLog)
            where expected <= through && out.count < maxCount {
                try t.scan(dbi, prefix: [], startingAt: Writer.logKey(expected)) { k, v in
                    guard let i = Writer.logIndex(k), i <= through, i == expected else { return false }
                    out.append((i, v))
                    expected += 1
                    return out.count < maxCount
                }
            }
            return out
        }
    }
}

extension EmberStore {
    /// Appends the log entries `from...through` to `builder`, at most `maxCount` and until it
    /// holds `maxBytes` entry bytes, from one read transaction and straight from the log's pages
    /// (`each` sees every entry first, borrowed: valid during the call only). Stops early at an
    /// entry the log no longer holds (compacted): the caller checks `builder.last`. Returns how
    /// many it appended.
    @discardableResult
    public func appendEncodedEntries(from: UInt64, through: UInt64, maxCount: Int, maxBytes: Int = .max,
                                     into builder: inout ArchiveSegmentBuilder,
                                     _ each: (UInt64, UnsafeRawBufferPointer) throws -> Void = { _, _ in }) throws -> Int {
        guard from <= through, maxCount > 0 else { return 0 }
        return try withRead { t in
            var n = 0
            var expected = from
            // Each table from the next index on (`LogRing`: the oldest table's rows come first).
            for dbi in try LogRing.readOrder(tables, t, ring: options.alternatingLog) {
                guard expected <= through, n < maxCount, builder.entryBytes < maxBytes else { break }
                let c = try t.cursor(dbi)
                defer { c.close() }
                var k = MDB_val(), v = MDB_val()
                let start = Writer.logKey(expected)
                var rc = start.withUnsafeBytes { kb in
                    k = MDB_val(mv_size: kb.count, mv_data: UnsafeMutableRawPointer(mutating: kb.baseAddress))
                    return mdb_cursor_get(c.ptr, &k, &v, MDB_SET_RANGE)
                }
                while rc == 0 {
                    guard k.mv_size == 8 else { break }
                    let key = UnsafeRawBufferPointer(start: k.mv_data, count: 8)
                    let i = key.reduce(UInt64(0)) { ($0 << 8) | UInt64($1) }
                    guard i == expected, i <= through else { break }
                    let entry = UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)
                    try each(i, entry)
                    try builder.append(index: i, entry)
                    n += 1
                    expected += 1
                    if n >= maxCount || builder.entryBytes >= maxBytes { break }
                    rc = mdb_cursor_get(c.ptr, &k, &v, MDB_NEXT)
                }
                if rc != 0 && rc != MDB_NOTFOUND { try check(rc) }
            }
            return n
        }
    }
}
