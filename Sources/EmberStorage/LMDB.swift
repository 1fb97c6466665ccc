import CLMDB
import EmberCore
import Foundation

/// Errors raised by the storage layer. Each carries a message fit for logs and client errors.
public enum StorageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// An LMDB call failed (code and `mdb_strerror` text).
    case lmdb(code: Int32, message: String)
    /// The invalid input, as the pure model reports it.
    case invalid(EmberError)
    case invalidNamespace(String)
    case entryTooLarge(bytes: Int, limit: Int)
    /// The writer's bounded queue is full; retry later (HTTP 503 / back-pressure).
    case queueFull(limit: Int)
    case closed
    /// Raft primitives used out of order (gaps, applying beyond the log).
    case logMismatch(String)
    case corrupt(String)
    case tooManyIndexes(limit: Int)
    case readTooLarge(limit: Int)
    /// `StoreOptions.maxTreeStreams` streamed reads are open (retry later: 503).
    case tooManyStreams(limit: Int)
    /// A rules document that does not load (parse or type error), with its line and reason.
    case invalidRules(line: Int, reason: String)
    /// The data directory was written by a newer build whose storage format this build cannot
    /// read (`BuildInfo.storageFormat`): opening it could misread or damage it.
    case newerStorageFormat(found: UInt64, newest: Int)
    /// A learner's store held commits not yet synced (`LazySync`) when its machine restarted:
    /// its file may be inconsistent, so it is not opened.
    case unsyncedAfterMachineRestart(directory: String)

    public var description: String {
        switch self {
        case .lmdb(let code, let message): return "storage error \(code): \(message)"
        case .invalid(let e): return e.description
        case .invalidNamespace(let ns): return "Invalid namespace \"\(ns.prefix(80))\": use 1–64 characters of A–Z a–z 0–9 - _"
        case .entryTooLarge(let bytes, let limit): return "Write is too large (\(bytes) bytes; the limit is \(limit))"
        case .queueFull(let limit): return "Too many pending writes (\(limit)); try again later"
        case .closed: return "The store is closed"
        case .logMismatch(let why): return "Log mismatch: \(why)"
        case .corrupt(let why): return "Corrupt storage record: \(why)"
        case .tooManyIndexes(let limit): return "Too many index definitions (limit \(limit))"
        // Firebase's text for a read over its response limit.
        case .readTooLarge: return "Data requested exceeds the maximum size that can be accessed with a single request."
        case .tooManyStreams(let limit): return "Too many streamed reads in progress on this node (\(limit)); retry later"
        case .invalidRules(let line, let reason): return "Rules refused: line \(line): \(reason)"
        case .newerStorageFormat(let found, let newest):
            return "The data directory has storage format \(found); this build (\(BuildInfo.version)) opens formats up to \(newest). "
                + "Run a build that reads it (deploy/OPERATIONS.md, \"Versions and upgrades\")"
        case .unsyncedAfterMachineRestart(let directory):
            return "The data directory \(directory) belongs to a learner that held commits not yet synced when its machine "
                + "restarted (marker \(LazySync.markerName)): its data file may be inconsistent. Empty the data directory and "
                + "start the node again with --join: its leader sends it a snapshot (docs/CLUSTER.md, \"Learners\")"
        }
    }
}

/// LMDB flag macros import as `Int32`; the APIs take `UInt32`.
@inline(__always) func flag(_ f: Int32) -> UInt32 { UInt32(bitPattern: f) }

@inline(__always) func check(_ rc: Int32) throws(StorageError) {
    if rc != 0 { throw lmdbError(rc) }
}

func lmdbError(_ rc: Int32) -> StorageError {
    .lmdb(code: rc, message: String(cString: mdb_strerror(rc)))
}

/// Opens the environment in `directory` with room for Ember's named tables (41 today, see
/// `Tables`: 32 of them the log ring's, plus the legacy ones an old directory still has while
/// it opens, a copy's scratch table, and headroom);
/// `maxReaders` as `StoreOptions.maxReaders` (nil: LMDB's default). The caller closes it.
func openEnvironment(_ directory: String, mapSize: Int, flags: UInt32, maxReaders: UInt32? = nil) throws -> OpaquePointer {
    var e: OpaquePointer?
    try check(mdb_env_create(&e))
    guard let e else { throw StorageError.lmdb(code: -1, message: "mdb_env_create") }
    do {
        try check(mdb_env_set_mapsize(e, mapSize))
        try check(mdb_env_set_maxdbs(e, 64))
        if let maxReaders { try check(mdb_env_set_maxreaders(e, maxReaders)) }
        try check(mdb_env_open(e, directory, flags | flag(MDB_NOTLS), 0o644))
    } catch {
        mdb_env_close(e)
        throw error
    }
    return e
}

/// A transaction handle with typed helpers. Not Sendable: it lives inside one call on one thread
/// (read transactions use `MDB_NOTLS`, write transactions stay on the writer thread).
struct Txn {
    let ptr: OpaquePointer
    /// Set on the writer's transactions while an online defrag copies the environment: every
    /// key put or deleted is noted, so the copy can be caught up (`ChangedKeys`).
    var changes: ChangedKeys? = nil

    func get(_ dbi: MDB_dbi, _ key: [UInt8]) throws -> [UInt8]? {
        if key.count > maxKeySize { return nil }  // no stored key is that long
        var result: [UInt8]? = nil
        var rc: Int32 = 0
        key.withUnsafeBytes { kb in
            var k = MDB_val(mv_size: kb.count, mv_data: UnsafeMutableRawPointer(mutating: kb.baseAddress))
            var v = MDB_val()
            rc = mdb_get(ptr, dbi, &k, &v)
            if rc == 0 { result = bytes(v) }
        }
        if rc == MDB_NOTFOUND { return nil }
        try check(rc)
        return result
    }

    /// `flags`: MDB_APPEND (as `DenseCopy` puts rows in key order) or 0.
    func put(_ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8], flags: UInt32 = 0) throws {
        try check(rawPut(dbi, key, value, flags: flags))
        changes?.note(dbi, key)
    }

    /// `mdb_put`'s return code, nothing noted.
    private func rawPut(_ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8], flags: UInt32) -> Int32 {
        key.withUnsafeBytes { kb in
            value.withUnsafeBytes { vb in
                var k = MDB_val(mv_size: kb.count, mv_data: UnsafeMutableRawPointer(mutating: kb.baseAddress))
                var v = MDB_val(mv_size: vb.count, mv_data: UnsafeMutableRawPointer(mutating: vb.baseAddress))
                return mdb_put(ptr, dbi, &k, &v, flags)
            }
        }
    }

    /// Puts with MDB_APPEND when `key` sorts after the table's last key, so a load in key order
    /// past the table's end fills each page before starting the next (a plain put splits a
    /// full page in half); LMDB answers MDB_KEYEXIST to an append below the last key, and the
    /// row is then put plainly (the code read, not thrown: no error text is made for it).
    /// Returns whether it appended.
    @discardableResult
    func putOrdered(_ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8]) throws -> Bool {
        let rc = rawPut(dbi, key, value, flags: flag(MDB_APPEND))
        if rc == MDB_KEYEXIST {
            try put(dbi, key, value)
            return false
        }
        try check(rc)
        changes?.note(dbi, key)
        return true
    }

    /// Empties (`delete` false) or deletes the table `dbi`. A defrag in progress cannot catch
    /// up a whole table's change by keys: it is told to give up (`ChangedKeys.invalidate`).
    func drop(_ dbi: MDB_dbi, delete: Bool) throws {
        changes?.invalidate("a table was replaced while the copy ran (a snapshot was installed)")
        try check(mdb_drop(ptr, dbi, delete ? 1 : 0))
    }

    @discardableResult
    func delete(_ dbi: MDB_dbi, _ key: [UInt8]) throws -> Bool {
        if key.count > maxKeySize { return false }
        var rc: Int32 = 0
        key.withUnsafeBytes { kb in
            var k = MDB_val(mv_size: kb.count, mv_data: UnsafeMutableRawPointer(mutating: kb.baseAddress))
            rc = mdb_del(ptr, dbi, &k, nil)
        }
        if rc == MDB_NOTFOUND { return false }
        try check(rc)
        changes?.note(dbi, key)
        return true
    }

    func cursor(_ dbi: MDB_dbi) throws -> Cursor {
        var c: OpaquePointer?
        try check(mdb_cursor_open(ptr, dbi, &c))
        return Cursor(ptr: c!, changes: changes, dbi: dbi)
    }

    /// Visits every record whose key starts with `prefix`, in key order (or reverse).
    func scan(_ dbi: MDB_dbi, prefix: [UInt8], startingAt start: [UInt8]? = nil,
              _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
        let c = try cursor(dbi)
        defer { c.close() }
        var entry = try c.seek(start ?? prefix)
        while let (k, v) = entry, k.starts(with: prefix) {
            if try !body(k, v) { return }
            entry = try c.next()
        }
    }

    /// `scan` without copying: `body` sees each record's bytes where LMDB's map holds them,
    /// valid only during that call (for a full pass that consumes them at once: the state hash).
    /// From `start` (a key at or after `prefix`) when given.
    func scanBorrowed(_ dbi: MDB_dbi, prefix: [UInt8], startingAt from: [UInt8]? = nil,
                      _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool) throws {
        let c = try cursor(dbi)
        defer { c.close() }
        var k = MDB_val(), v = MDB_val()
        var rc: Int32
        if prefix.isEmpty && from == nil {
            rc = mdb_cursor_get(c.ptr, &k, &v, MDB_FIRST)
        } else {
            let start = Array((from ?? prefix).prefix(maxKeySize))
            rc = start.withUnsafeBytes { kb in
                k = MDB_val(mv_size: kb.count, mv_data: UnsafeMutableRawPointer(mutating: kb.baseAddress))
                return mdb_cursor_get(c.ptr, &k, &v, MDB_SET_RANGE)
            }
        }
        while rc == 0 {
            let key = UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size)
            guard key.starts(with: prefix) else { return }
            if try !body(key, UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)) { return }
            rc = mdb_cursor_get(c.ptr, &k, &v, MDB_NEXT)
        }
        if rc != MDB_NOTFOUND { try check(rc) }
    }

    /// Deletes every record whose key starts with `prefix`; returns how many. `using`: an
    /// open cursor on `dbi` to position (left open; the replay's, `ReplayCursors`), or nil.
    @discardableResult
    func deletePrefix(_ dbi: MDB_dbi, _ prefix: [UInt8], excludingExact: Bool = false, using open: Cursor? = nil) throws -> Int {
        let c = try open ?? cursor(dbi)
        defer { if open == nil { c.close() } }
        var n = 0
        // Keys read in place: the common case (nothing under the prefix, e.g. every new leaf's
        // version rows) copies nothing.
        try c.walkKeys(from: prefix) { k in
            guard k.count >= prefix.count, prefix.withUnsafeBytes({ p in p.isEmpty || memcmp(k.baseAddress!, p.baseAddress!, p.count) == 0 })
            else { return .stop }
            if excludingExact && k.count == prefix.count { return .next }
            n += 1
            return .delete
        }
        return n
    }

    /// True when some key starts with `prefix`.
    func hasPrefix(_ dbi: MDB_dbi, _ prefix: [UInt8]) throws -> Bool {
        let c = try cursor(dbi)
        defer { c.close() }
        guard let k = try c.seekKey(prefix) else { return false }
        return k.starts(with: prefix)
    }
}

/// LMDB's compiled-in key limit (`mdb_env_get_maxkeysize`, 511 by default).
let maxKeySize = 511

@inline(__always) func bytes(_ v: MDB_val) -> [UInt8] {
    guard v.mv_size > 0, let p = v.mv_data else { return [] }
    return Array(UnsafeRawBufferPointer(start: p, count: v.mv_size))
}

struct Cursor {
    let ptr: OpaquePointer
    /// The transaction's `changes` and the cursor's table: a delete through it is noted too.
    var changes: ChangedKeys? = nil
    var dbi: MDB_dbi = 0

    func close() { mdb_cursor_close(ptr) }

    private func op(_ o: MDB_cursor_op, key: [UInt8]? = nil, wantValue: Bool = true) throws -> ([UInt8], [UInt8])? {
        var rc: Int32 = 0
        var result: ([UInt8], [UInt8])? = nil
        func run(_ k: inout MDB_val) {
            var v = MDB_val()
            rc = mdb_cursor_get(ptr, &k, &v, o)
            if rc == 0 { result = (bytes(k), wantValue ? bytes(v) : []) }
        }
        if let key {
            key.withUnsafeBytes { kb in
                var k = MDB_val(mv_size: kb.count, mv_data: UnsafeMutableRawPointer(mutating: kb.baseAddress))
                run(&k)
            }
        } else {
            var k = MDB_val()
            run(&k)
        }
        if rc == MDB_NOTFOUND { return nil }
        try check(rc)
        return result
    }

    /// First record with key >= `key`.
    /// (LMDB rejects empty keys, so an empty `key` means the first record.)
    /// A key longer than any storable key is cut to `maxKeySize`: the records between the cut
    /// and the full key would have to start with the cut, i.e. be longer than storable, so none
    /// exist and every caller's prefix or bound check stays exact.
    func seek(_ key: [UInt8]) throws -> ([UInt8], [UInt8])? {
        key.isEmpty ? try op(MDB_FIRST) : try op(MDB_SET_RANGE, key: Array(key.prefix(maxKeySize)))
    }
    func seekKey(_ key: [UInt8]) throws -> [UInt8]? {
        key.isEmpty ? try op(MDB_FIRST, wantValue: false)?.0
            : try op(MDB_SET_RANGE, key: Array(key.prefix(maxKeySize)), wantValue: false)?.0
    }
    func next() throws -> ([UInt8], [UInt8])? { try op(MDB_NEXT) }
    func nextKey() throws -> [UInt8]? { try op(MDB_NEXT, wantValue: false)?.0 }
    func prev() throws -> ([UInt8], [UInt8])? { try op(MDB_PREV) }
    func last() throws -> ([UInt8], [UInt8])? { try op(MDB_LAST) }
    func first() throws -> ([UInt8], [UInt8])? { try op(MDB_FIRST) }
    func current() throws -> ([UInt8], [UInt8])? { try op(MDB_GET_CURRENT) }
    func currentKey() throws -> [UInt8]? { try op(MDB_GET_CURRENT, wantValue: false)?.0 }

    /// The record `o` puts the cursor on (with `key` for the operations that take one, such as
    /// MDB_SET_RANGE), read in place by `read`: both buffers point into LMDB's map and are valid
    /// only during that call (nothing is copied unless `read` copies it). nil: no such record.
    func inPlace<T>(_ o: MDB_cursor_op, key: [UInt8]? = nil,
                    _ read: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> T) throws -> T? {
        var k = MDB_val(), v = MDB_val()
        let rc: Int32
        if let key {
            precondition(!key.isEmpty && key.count <= maxKeySize, "a key LMDB can hold")
            rc = key.withUnsafeBytes { kb in
                k = MDB_val(mv_size: kb.count, mv_data: UnsafeMutableRawPointer(mutating: kb.baseAddress))
                // On success LMDB points `k` at the record's key in its map.
                return mdb_cursor_get(ptr, &k, &v, o)
            }
        } else {
            rc = mdb_cursor_get(ptr, &k, &v, o)
        }
        if rc == MDB_NOTFOUND { return nil }
        try check(rc)
        return try read(UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size), UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size))
    }

    /// Last record with key < `key`.
    func seekLastLT(_ key: [UInt8]) throws -> ([UInt8], [UInt8])? {
        if try seek(key) != nil { return try prev() }
        return try last()
    }

    /// Last record with key <= `key`.
    func seekLastLE(_ key: [UInt8]) throws -> ([UInt8], [UInt8])? {
        if let (k, v) = try seek(key) {
            if k == key { return (k, v) }
            return try prev()
        }
        return try last()
    }

    /// Puts `key` (flags 0: LMDB searches from the cursor's page when the key falls in it).
    /// `append`: the key is believed past the table's last key: MDB_APPEND (a load in key
    /// order then fills each page instead of splitting it in half); LMDB checks it, and a key
    /// that is not past the end is put plainly.
    func put(_ key: [UInt8], _ value: [UInt8], append: Bool = false) throws {
        var rc: Int32 = 0
        func run(_ flags: UInt32) {
            key.withUnsafeBytes { kb in
                value.withUnsafeBytes { vb in
                    var k = MDB_val(mv_size: kb.count, mv_data: UnsafeMutableRawPointer(mutating: kb.baseAddress))
                    var v = MDB_val(mv_size: vb.count, mv_data: UnsafeMutableRawPointer(mutating: vb.baseAddress))
                    rc = mdb_cursor_put(ptr, &k, &v, flags)
                }
            }
        }
        run(append ? flag(MDB_APPEND) : 0)
        if append && rc == MDB_KEYEXIST { run(0) }
        try check(rc)
        changes?.note(dbi, key)
    }

    func deleteCurrent() throws {
        if let changes, let k = try currentKey() { changes.note(dbi, k) }
        try check(mdb_cursor_del(ptr, 0))
    }

    /// The first (`firstKey`) or last (`lastKey`) record's key, read where LMDB's map holds it
    /// by `read` (valid only during that call): neither key nor value is copied.
    func firstKey<T>(_ read: (UnsafeRawBufferPointer) throws -> T) throws -> T? { try keyInPlace(MDB_FIRST, read) }
    func lastKey<T>(_ read: (UnsafeRawBufferPointer) throws -> T) throws -> T? { try keyInPlace(MDB_LAST, read) }

    private func keyInPlace<T>(_ o: MDB_cursor_op, _ read: (UnsafeRawBufferPointer) throws -> T) throws -> T? {
        var k = MDB_val(), v = MDB_val()
        let rc = mdb_cursor_get(ptr, &k, &v, o)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc)
        return try read(UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size))
    }

    /// What a key-only walk does at a key: go on, delete the record (the walk goes on with the
    /// one that followed it), or stop.
    enum KeyStep { case next, delete, stop }

    /// Walks the keys from the first at or after `start` (empty: the first record) in order, each
    /// read in place by `step` (valid only during that call; no value is read or copied).
    func walkKeys(from start: [UInt8], _ step: (UnsafeRawBufferPointer) throws -> KeyStep) throws {
        var k = MDB_val(), v = MDB_val()
        var rc: Int32
        if start.isEmpty {
            rc = mdb_cursor_get(ptr, &k, &v, MDB_FIRST)
        } else {
            rc = (start.count <= maxKeySize ? start : Array(start.prefix(maxKeySize))).withUnsafeBytes { kb in
                k = MDB_val(mv_size: kb.count, mv_data: UnsafeMutableRawPointer(mutating: kb.baseAddress))
                return mdb_cursor_get(ptr, &k, &v, MDB_SET_RANGE)
            }
        }
        while rc == 0 {
            let key = UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size)
            switch try step(key) {
            case .stop: return
            case .next: break
            case .delete:
                changes?.note(dbi, Array(key))
                try check(mdb_cursor_del(ptr, 0))
            }
            // After `mdb_cursor_del` the cursor rests on the following record; MDB_NEXT returns it.
            rc = mdb_cursor_get(ptr, &k, &v, MDB_NEXT)
        }
        if rc != MDB_NOTFOUND { try check(rc) }
    }
}
