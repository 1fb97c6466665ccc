import CLMDB
import EmberCore
import Foundation

/// What the data directory holds, table by table (issue: storage footprint). LMDB counts pages
/// per table (`mdb_stat`); pages no table uses are on its free list (table 0) for reuse, and
/// LMDB never shrinks its file: `EmberStore.compact` rewrites it without them.
public struct StorageFootprint: Sendable, Equatable {
    public struct Table: Sendable, Equatable {
        public let name: String
        public let entries: Int
        /// Branch, leaf and overflow pages.
        public let pages: Int
        public let bytes: Int
    }

    public let pageSize: Int
    /// tree, versions, index (each with its overflow twin for long keys), log, meta.
    public let tables: [Table]
    /// Pages on the free list, reusable by later writes.
    public let freePages: Int
    /// Pages of the file in use or free (LMDB's last page number + 1).
    public let filePages: Int
    /// The data file's size on disk.
    public let fileBytes: Int

    public var freeBytes: Int { freePages * pageSize }
    /// Bytes the data needs: the file less its free pages (about what a compacted copy takes).
    public var liveBytes: Int { max(0, filePages - freePages) * pageSize }

    public func json() -> JSON {
        var t: KeyMap<JSON> = [:]
        for table in tables {
            t[table.name] = .object(["entries": .int(Int64(table.entries)), "pages": .int(Int64(table.pages)),
                                     "bytes": .int(Int64(table.bytes))])
        }
        return .object(["pageSize": .int(Int64(pageSize)), "tables": .object(t),
                        "freePages": .int(Int64(freePages)), "freeBytes": .int(Int64(freeBytes)),
                        "liveBytes": .int(Int64(liveBytes)), "fileBytes": .int(Int64(fileBytes))])
    }
}

/// The data directory is in use by an open store (a running node); compaction needs it stopped.
public struct DataDirectoryInUse: Error, CustomStringConvertible {
    public let directory: String
    public var description: String { "\(directory) is in use by a running node; stop it first" }
}

extension EmberStore {
    /// The footprint, from one read transaction (a few `mdb_stat` calls and a walk of the free
    /// list: cheap, for `/.ember/status`).
    public func footprint() throws -> StorageFootprint {
        let t = tables
        // The index's pages include its location ids' (`idxloc`); its entries count rows only.
        // The trigger records' table counts as meta (where format 6 kept them).
        let groups: [(String, [MDB_dbi], entries: Int)] = [("tree", [t.tree, t.treex], 2), ("versions", [t.ver, t.verx], 2),
                                                           ("index", [t.idx, t.idxx, t.idxloc, t.idxlocx], 2),
                                                           ("log", t.logRing, t.logRing.count), ("meta", [t.meta, t.trigrec], 2)]
        let fileBytes = (try? FileManager.default.attributesOfItem(atPath: directory + "/data.mdb")[.size] as? Int) ?? 0
        return try withVisibleRead { txn in
            var pageSize = 4096
            var out: [StorageFootprint.Table] = []
            for (name, dbis, counted) in groups {
                var entries = 0, pages = 0
                for (i, dbi) in dbis.enumerated() {
                    var s = MDB_stat()
                    try check(mdb_stat(txn.ptr, dbi, &s))
                    pageSize = Int(s.ms_psize)
                    if i < counted { entries += s.ms_entries }
                    pages += s.ms_branch_pages + s.ms_leaf_pages + s.ms_overflow_pages
                }
                out.append(.init(name: name, entries: entries, pages: pages, bytes: pages * pageSize))
            }
            var info = MDB_envinfo()
            try check(mdb_env_info(mdb_txn_env(txn.ptr), &info))  // the environment this read is on
            return StorageFootprint(pageSize: pageSize, tables: out, freePages: try Self.freePages(txn),
                                    filePages: info.me_last_pgno + 1, fileBytes: fileBytes)
        }
    }

    /// Pages on LMDB's free list: table 0, each value a list of page numbers led by its count.
    static func freePages(_ txn: Txn) throws -> Int {
        let c = try txn.cursor(0)
        defer { c.close() }
        var total = 0
        var row = try c.first()
        while let (_, value) = row {
            if value.count >= MemoryLayout<Int>.size {
                total += value.withUnsafeBytes { $0.loadUnaligned(as: Int.self) }
            }
            row = try c.next()
        }
        return total
    }

    /// Rewrites a stopped node's data directory without free pages and with full pages
    /// (`DenseCopy`: every table copied in key order), in place or into `output` (a new
    /// directory). Refused while a store has `directory` open.
    /// A directory of a former layout also gets its small objects rewritten as inline records
    /// (`Reinline`), in a staging copy, so the source is only ever read.
    /// Returns the data file's size before and after.
    @discardableResult
    public static func compact(directory: String, output: String? = nil) throws -> (before: Int, after: Int) {
        let lock = try DirectoryLock(directory: directory, exclusive: true)
        defer { lock.release() }
        let dataFile = directory + "/data.mdb"
        guard let before = try? FileManager.default.attributesOfItem(atPath: dataFile)[.size] as? Int else {
            throw StorageError.corrupt("no data file in \(directory)")
        }
        let target = output ?? directory + "/.compact-\(UUID().uuidString)"
        if FileManager.default.fileExists(atPath: target + "/data.mdb") {
            throw StorageError.corrupt("\(target) already holds a data file")
        }
        let mapSize = max(StoreOptions().mapSize, before)
        let e = try openEnvironment(directory, mapSize: mapSize, flags: flag(MDB_RDONLY))
        do {
            try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
            if try Self.inlineLayoutDone(e) {
                try DenseCopy.copy(e, into: target, mapSize: mapSize)
            } else {
                try Self.compactReinlined(e, into: target, staging: directory + "/.compact-stage-\(UUID().uuidString)", mapSize: mapSize)
            }
            mdb_env_close(e)
        } catch {
            mdb_env_close(e)
            if output == nil { try? FileManager.default.removeItem(atPath: target) }
            throw error
        }
        let after = (try FileManager.default.attributesOfItem(atPath: target + "/data.mdb")[.size] as? Int) ?? 0
        if output == nil {
            // rename(2) replaces the data file atomically; the old lock file (reader table) goes
            // with it, as no process has the environment open.
            guard rename(target + "/data.mdb", dataFile) == 0 else {
                throw StorageError.corrupt("cannot replace \(dataFile): errno \(errno)")
            }
            try? FileManager.default.removeItem(atPath: directory + "/lock.mdb")
            try? FileManager.default.removeItem(atPath: target)
        }
        return (before, after)
    }
}

extension EmberStore {
    /// Whether the (read-only) environment `e` has had its per-leaf objects rewritten (`Reinline`).
    static func inlineLayoutDone(_ e: OpaquePointer) throws -> Bool {
        var t: OpaquePointer?
        try check(mdb_txn_begin(e, nil, flag(MDB_RDONLY), &t))
        defer { mdb_txn_abort(t) }
        var meta: MDB_dbi = 0
        let rc = mdb_dbi_open(t, "meta", 0, &meta)
        if rc == MDB_NOTFOUND { return false }
        try check(rc)
        return try Txn(ptr: t!).get(meta, Reinline.doneMetaKey) != nil
    }

    /// Dense copy of `source` into `staging`, the per-leaf objects rewritten there, then a dense
    /// copy of that into `target` (the rewrite frees and splits pages the second copy leaves out).
    static func compactReinlined(_ source: OpaquePointer, into target: String, staging: String, mapSize: Int) throws {
        try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: staging) }
        try DenseCopy.copy(source, into: staging, mapSize: mapSize)
        let e = try openEnvironment(staging, mapSize: mapSize, flags: 0)
        defer { mdb_env_close(e) }
        var t: OpaquePointer?
        try check(mdb_txn_begin(e, nil, 0, &t))
        let tables: Tables
        do {
            tables = try Tables.open(t!, inlineObjects: true)
            try tables.markStorageFormat(Txn(ptr: t!))
        } catch { mdb_txn_abort(t); throw error }
        try check(mdb_txn_commit(t))
        _ = try TextOrderMigration.migrate(e, tables)
        _ = try IndexLocations.migrate(e, tables)
        _ = try Reinline.migrate(e, tables)
        try DenseCopy.copy(e, into: target, mapSize: mapSize)
    }
}

/// `flock` on `<data>/ember.lock`: every open store holds it shared; compaction takes it
/// exclusively, so it is refused while a node (any process) has the directory open.
final class DirectoryLock: @unchecked Sendable {
    private var fd: Int32

    init(directory: String, exclusive: Bool) throws {
        fd = open(directory + "/ember.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw StorageError.corrupt("cannot open \(directory)/ember.lock: errno \(errno)") }
        if flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0 {
            close(fd)
            fd = -1
            throw DataDirectoryInUse(directory: directory)
        }
    }

    func release() {
        if fd >= 0 { close(fd); fd = -1 }
    }

    deinit { release() }
}
