import CLMDB
import CZlib
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Reads the archive staging of a data directory written by the version that kept a single
/// node's unarchived entries in files beside LMDB (`DATA/archive-staging/<first index>.stage`)
/// into log rows, then removes the files: a single node that archives keeps them as log rows
/// again, written in each batch's own transaction (one sync per batch; the staging's own sync
/// in series with LMDB's cost a saturated node 23 % of its writes, issue 37).
///
/// The files' format: records `[index u64][length u32][crc32 of index, length and entry u32]
/// [entry]` (big-endian), the entry as the log stores it. Records past the applied index (staged
/// for a commit that did not happen) and a torn or damaged tail are left out. When what is left
/// does not reach the applied index, none of it is of use (the archive would have a gap it
/// cannot see): the log stays empty and the archiver reports the gap and starts from a base,
/// as after a compaction past the hold.
enum StagingImport {
    static let directoryName = "archive-staging"
    /// The staging's name once imported, until removed (a rename is atomic, a removal is not).
    static let importedName = "archive-staging.imported"
    static let fileSuffix = ".stage"
    static let headerBytes = 16
    /// Bytes read per `pread`.
    static let readChunk = 1 << 20

    /// Imports `directory`'s staging, if it has one, into the log of a single node that archives
    /// (`archiveHold` > 0, `logRetention` 0). Any other store leaves the staging alone (an
    /// offline `ember` command on a stopped node must not lose what its archive lacks). One
    /// write transaction: the log's tables are emptied (rows there come from an import whose
    /// files were not removed yet: the same entries), the rows put into `log`, the first log index set; the files go
    /// after its commit (renamed first, the rename synced: once LMDB holds newer writes, an
    /// older staging must never be imported again), so a crash before the rename imports the
    /// same entries again.
    static func run(_ core: StoreCore, writer w: Writer, directory: String) throws {
        let options = core.options
        let dir = directory + "/" + directoryName
        let imported = directory + "/" + importedName
        if FileManager.default.fileExists(atPath: imported) { try FileManager.default.removeItem(atPath: imported) }
        guard options.archiveHold > 0, options.logRetention == 0, FileManager.default.fileExists(atPath: dir) else { return }
        let applied = w.applied
        let tables = core.tables
        var t: OpaquePointer?
        try check(mdb_txn_begin(core.env, nil, 0, &t))
        let txn = Txn(ptr: t!)
        var first: UInt64? = nil
        var expected: UInt64 = 0
        do {
            try LogRing.reset(tables, txn)
            for name in try listSegments(dir) {
                if first == nil { first = name; expected = name }
                guard name == expected, expected <= applied else { break }
                let fd = open(dir + "/" + Self.name(name), O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else { throw ioError("open \(dir)/\(Self.name(name))") }
                defer { Glibc.close(fd) }
                try scan(fd, maxEntryBytes: options.maxEntryBytes) { index, entry in
                    guard index == expected, index <= applied else { return false }
                    try txn.put(tables.log, Writer.logKey(index), Array(entry), flags: flag(MDB_APPEND))
                    expected += 1
                    return true
                }
            }
            let reached = first != nil && expected == applied + 1
            if !reached { try LogRing.reset(tables, txn) }
            let firstIndex = reached ? first! : applied + 1
            try tables.putMetaU64(txn, "firstIndex", firstIndex)
            try check(mdb_txn_commit(t))
            w.firstIndex = firstIndex
            w.publishState()
        } catch {
            mdb_txn_abort(t)
            throw error
        }
        guard rename(dir, imported) == 0 else { throw ioError("rename \(dir)") }
        if options.durable {
            let d = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            defer { if d >= 0 { Glibc.close(d) } }
            guard d >= 0, fsync(d) == 0 else { throw ioError("sync \(directory)") }
        }
        try FileManager.default.removeItem(atPath: imported)
    }

    static func name(_ first: UInt64) -> String {
        let digits = String(first)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits + fileSuffix
    }

    static func listSegments(_ directory: String) throws -> [UInt64] {
        try FileManager.default.contentsOfDirectory(atPath: directory).compactMap { n -> UInt64? in
            guard n.hasSuffix(fileSuffix) else { return nil }
            return UInt64(n.dropLast(fileSuffix.count))
        }.sorted()
    }

    static func ioError(_ what: String) -> StorageError {
        let e = errno
        return .lmdb(code: e, message: "archive staging: \(what): \(String(cString: strerror(e)))")
    }

    /// A record as the former version wrote it (tests build such files with it).
    static func record(index: UInt64, entry: [UInt8]) -> [UInt8] {
        var r = [UInt8](repeating: 0, count: headerBytes)
        for k in 0..<8 { r[k] = UInt8(truncatingIfNeeded: index >> UInt64(56 - 8 * k)) }
        for k in 0..<4 { r[8 + k] = UInt8(truncatingIfNeeded: UInt32(entry.count) >> UInt32(24 - 8 * k)) }
        let crc = r.withUnsafeBytes { h in entry.withUnsafeBytes { checksum(header: h, entry: $0) } }
        for k in 0..<4 { r[12 + k] = UInt8(truncatingIfNeeded: crc >> UInt32(24 - 8 * k)) }
        return r + entry
    }

    static func checksum(header: UnsafeRawBufferPointer, entry: UnsafeRawBufferPointer) -> UInt32 {
        var c = crc32(0, header.bindMemory(to: Bytef.self).baseAddress, 12)
        c = crc32(c, entry.bindMemory(to: Bytef.self).baseAddress, uInt(entry.count))
        return UInt32(truncatingIfNeeded: c)
    }

    /// Calls `body` with each whole, intact record (index, entry borrowed for the call) until it
    /// returns false, the file ends, or a record is torn or damaged (zeros written ahead of the
    /// records read as a record of length 0: the end).
    static func scan(_ fd: Int32, maxEntryBytes: Int, _ body: (UInt64, UnsafeRawBufferPointer) throws -> Bool) throws {
        var buffer = [UInt8](repeating: 0, count: readChunk)
        var base = 0  // file offset of buffer[0]
        var filled = 0
        var at = 0  // next record's position in the buffer
        // Enough bytes for `need` from `at` in the buffer, reading more if needed.
        func ensure(_ need: Int) throws -> Bool {
            if at + need <= filled { return true }
            if at > 0 {
                buffer.withUnsafeMutableBytes { b in _ = memmove(b.baseAddress!, b.baseAddress! + at, filled - at) }
                base += at; filled -= at; at = 0
            }
            if need > buffer.count { buffer.append(contentsOf: repeatElement(0, count: need - buffer.count)) }
            while filled < need {
                let n = buffer.withUnsafeMutableBytes { b in pread(fd, b.baseAddress! + filled, b.count - filled, off_t(base + filled)) }
                if n < 0 { if errno == EINTR { continue }; throw ioError("read") }
                if n == 0 { return false }
                filled += n
            }
            return true
        }
        while try ensure(headerBytes) {
            let (index, length, crc) = buffer.withUnsafeBytes { b -> (UInt64, Int, UInt32) in
                var i: UInt64 = 0, n: UInt32 = 0, c: UInt32 = 0
                for k in 0..<8 { i = i << 8 | UInt64(b[at + k]) }
                for k in 8..<12 { n = n << 8 | UInt32(b[at + k]) }
                for k in 12..<16 { c = c << 8 | UInt32(b[at + k]) }
                return (i, Int(n), c)
            }
            guard length >= 1, length <= maxEntryBytes, try ensure(headerBytes + length) else { return }
            let go = try buffer.withUnsafeBytes { b -> Bool in
                let h = UnsafeRawBufferPointer(rebasing: b[at..<(at + headerBytes)])
                let e = UnsafeRawBufferPointer(rebasing: b[(at + headerBytes)..<(at + headerBytes + length)])
                guard checksum(header: h, entry: e) == crc else { return false }
                return try body(index, e)
            }
            guard go else { return }
            at += headerBytes + length
        }
    }
}
