import CLMDB
import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension StagingLog {
    /// Rows moved per read transaction when a former version's log rows become staging.
    static let migrateBatch = 10_000

    /// Opens the staging of a store that keeps one (`StoreOptions.archiveStaging`), after
    /// moving into it the log rows a former version kept in LMDB for the archive. A store opened
    /// without it leaves the directory alone (an offline `ember` command on a stopped node must
    /// not lose what its archive lacks); writes made meanwhile leave it short of the applied
    /// index, and the next opening with it then drops it (`init`).
    static func attach(_ core: StoreCore, writer w: Writer, directory: String) throws {
        let dir = directory + "/" + directoryName
        guard core.options.archiveStaging else { return }
        precondition(core.options.archiveHold > 0 && core.options.logRetention == 0,
                     "the archive staging is for a single node that archives (archiveHold > 0, logRetention 0)")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try? FileManager.default.removeItem(atPath: dir + "/migrating.tmp")  // a migration cut short
        try migrateLogRows(core, applied: w.applied, directory: dir)
        let s = try StagingLog(storeDirectory: directory, applied: w.applied, durable: core.options.durable,
                               maxEntryBytes: core.options.maxEntryBytes, hold: core.options.archiveHold)
        core.staging = s
        w.firstIndex = s.firstIndex
        w.publishState()
    }

    /// A directory from before the staging keeps the archive's entries as LMDB log rows: they
    /// become one staging segment (written whole and synced under a temporary name, then
    /// renamed), and only then are the rows removed. A crash in between leaves the rows, and
    /// the next open does it again from them.
    static func migrateLogRows(_ core: StoreCore, applied: UInt64, directory: String) throws {
        let tables = core.tables
        let head: UInt64? = try core.withRead { t in
            var first: UInt64? = nil
            try t.scan(tables.log, prefix: []) { k, _ in first = Writer.logIndex(k); return false }
            return first
        }
        guard let head else { return }
        for f in try listSegments(directory) { try remove(directory + "/" + name(f)) }
        let temporary = directory + "/migrating.tmp"
        let fd = open(temporary, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw ioError("create \(temporary)") }
        defer { Glibc.close(fd) }
        var expected = head, offset = 0
        while expected <= applied {
            let rows: [(index: UInt64, bytes: [UInt8])] = try core.withRead { t in
                var out: [(index: UInt64, bytes: [UInt8])] = []
                try t.scan(tables.log, prefix: [], startingAt: Writer.logKey(expected)) { k, v in
                    guard let i = Writer.logIndex(k), i == expected + UInt64(out.count), i <= applied else { return false }
                    out.append((i, v))
                    return out.count < migrateBatch
                }
                return out
            }
            guard !rows.isEmpty else { break }
            let result = StagedResult()
            result.finish(StagingSync.run(StagingSync.Job(fd: fd, offset: offset, entries: rows, durable: false, result: result)))
            try result.wait()
            offset += rows.reduce(0) { $0 + headerBytes + $1.bytes.count }
            expected += UInt64(rows.count)
        }
        // Rows that do not reach the applied index are of no use to the archive (it finds its
        // next entry gone and reports the gap, as after a compaction past the hold).
        if expected == applied + 1 {
            guard fsync(fd) == 0 else { throw ioError("sync \(temporary)") }
            guard rename(temporary, directory + "/" + name(head)) == 0 else { throw ioError("rename \(temporary)") }
            let d = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            defer { if d >= 0 { Glibc.close(d) } }
            guard d >= 0, fsync(d) == 0 else { throw ioError("sync \(directory)") }
        } else {
            try remove(temporary)
        }
        var t: OpaquePointer?
        try check(mdb_txn_begin(core.env, nil, 0, &t))
        let rc = mdb_drop(t, tables.log, 0)
        guard rc == 0 else { mdb_txn_abort(t); try check(rc); return }
        try check(mdb_txn_commit(t))
    }
}
