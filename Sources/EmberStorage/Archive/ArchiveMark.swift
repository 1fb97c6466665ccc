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
            try t.scan(tables.log, prefix: [], startingAt: Writer.logKey(from)) { k, v in
                guard let i = Writer.logIndex(k), i <= through, i == expected else { return false }
                out.append((i, v))
                expected += 1
                return out.count < maxCount
            }
            return out
        }
    }
}
