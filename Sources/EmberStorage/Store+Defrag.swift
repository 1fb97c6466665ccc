import CLMDB
import EmberCore
import Foundation

/// Online defragmentation (issue 41): LMDB never shrinks its data file, and pages split by
/// inserts in random order stay half full. `EmberStore.defrag` writes the dense copy
/// `ember compact` makes (`DenseCopy`) while the node runs, then switches to it:
///
/// 1. The writer starts noting every key it writes (`ChangedKeys`) and, in the same job, a
///    read snapshot is taken; the copy is made from that snapshot on a thread of its own while
///    writes go on.
/// 2. Catch-up rounds, writes still going on: the writer swaps in a fresh `ChangedKeys` and
///    takes a new snapshot in one job; the keys noted before are copied from that snapshot.
/// 3. The pause: once the keys noted are at most `DefragOptions.maxPauseKeys`, one writer job
///    (no write can commit meanwhile) copies them, syncs the copy, renames it over `data.mdb`
///    (atomic), syncs the directory and opens the new file (`EnvHandle`). Reads never pause:
///    those running finish on the old environment.
///
/// Crash safety: until the rename `data.mdb` is the old file, untouched; after it, the new
/// one, complete and synced. Leftovers (`Defrag.workName`, links) are removed when a store opens.
public struct DefragOptions: Sendable {
    /// Keys written since the last catch-up that the pause copies at most: it bounds the pause
    /// (a key costs a lookup and a put, ~1-3 µs; the pause's other work is two fsyncs, a rename
    /// and an environment open). More keys than this take another round while writes go on.
    public var maxPauseKeys: Int = 50_000
    /// Catch-up rounds before giving up on a node whose writes outrun them.
    public var maxRounds: Int = 8
    public init() {}
}

public struct DefragReport: Sendable, Equatable {
    public var bytesBefore: Int
    public var bytesAfter: Int
    /// How long writes were held (the final job on the writer thread).
    public var pauseNanos: UInt64
    /// The copy and the catch-up rounds before the pause (writes going on).
    public var copyNanos: UInt64
    /// Keys copied again by the catch-up rounds, and by the pause alone.
    public var caughtUpKeys: Int
    public var pauseKeys: Int
    public var rounds: Int
    /// When it finished (ms since the epoch).
    public var finishedAtMs: Int64

    public func json() -> JSON {
        .object(["bytesBefore": .int(Int64(bytesBefore)), "bytesAfter": .int(Int64(bytesAfter)),
                 "pauseMs": .double(Double(pauseNanos) / 1e6), "copyMs": .double(Double(copyNanos) / 1e6),
                 "caughtUpKeys": .int(Int64(caughtUpKeys)), "pauseKeys": .int(Int64(pauseKeys)),
                 "rounds": .int(Int64(rounds)), "finishedAtMs": .int(finishedAtMs)])
    }
}

public enum DefragError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The filesystem lacks room for the copy (HTTP 507).
    case insufficientSpace(needed: Int, available: Int)
    /// Another defrag runs, or readers from before the last one still hold its environment.
    case busy(String)
    /// The copy could not be caught up (the reason); nothing changed.
    case gaveUp(String)

    public var description: String {
        switch self {
        case .insufficientSpace(let needed, let available):
            return "Not enough disk space for the defrag copy: it needs \(needed) bytes, the filesystem has \(available) available"
        case .busy(let why): return why
        case .gaveUp(let why): return "Defrag gave up, nothing changed: \(why)"
        }
    }
}

enum Defrag {
    /// The directory (next to `data.mdb`) the copy is written in.
    static let workName = ".defrag-copy"
    /// Links to `data.mdb` a defragged environment is opened through (see `EnvHandle`).
    static func linkName(_ slot: Int) -> String { ".defrag-live-\(slot).mdb" }

    /// Removes a cut-short defrag's copy and links (the store is not open yet).
    static func removeLeftovers(in directory: String) {
        let fm = FileManager.default
        for name in (try? fm.contentsOfDirectory(atPath: directory)) ?? [] where name.hasPrefix(".defrag-") {
            try? fm.removeItem(atPath: directory + "/" + name)
        }
    }

    /// Room the copy needs: the pages in use (a dense copy takes fewer) and a tenth more for the
    /// keys written meanwhile.
    static func neededBytes(liveBytes: Int) -> Int { liveBytes + liveBytes / 10 + (1 << 20) }

    static func availableBytes(_ directory: String) -> Int? {
        var s = statvfs()
        guard statvfs(directory, &s) == 0 else { return nil }
        return Int(s.f_bavail) * Int(s.f_frsize)
    }

    /// The named tables by handle, to find a noted key's table in the copy.
    static func tableNames(_ t: Tables) -> [MDB_dbi: String] {
        var names: [MDB_dbi: String] = [t.tree: "tree", t.ver: "ver", t.idx: "idx", t.meta: "meta",
                                        t.treex: "treex", t.verx: "verx", t.idxx: "idxx", t.idxloc: "idxloc", t.idxlocx: "idxlocx",
                                        t.trigrec: TriggerRecordRows.tableName]
        for (slot, dbi) in t.logRing.enumerated() { names[dbi] = LogRing.tableName(slot) }
        return names
    }

    /// Writes the current value (or the absence) of every noted key, as `source` sees it, into
    /// the copy `target`, in one transaction, keys in order. Returns the keys copied.
    static func catchUp(_ changes: ChangedKeys, from source: Txn, into target: OpaquePointer,
                        names: [MDB_dbi: String]) throws -> Int {
        if let why = changes.invalid { throw DefragError.gaveUp(why) }
        var w: OpaquePointer?
        try check(mdb_txn_begin(target, nil, 0, &w))
        let t = Txn(ptr: w!)
        do {
            for (dbi, keys) in changes.keys {
                guard let name = names[dbi] else { throw DefragError.gaveUp("a key of table \(dbi) was written, not one of the store's") }
                var to: MDB_dbi = 0
                try check(mdb_dbi_open(w, name, flag(MDB_CREATE), &to))
                for k in keys.sorted(by: bytesLess) {
                    if let v = try source.get(dbi, k) { try t.put(to, k, v) } else { try t.delete(to, k) }
                }
            }
        } catch {
            mdb_txn_abort(w)
            throw error
        }
        try check(mdb_txn_commit(w))
        return changes.count
    }
}

/// A read transaction begun on the writer thread and used on another (`MDB_NOTLS`), holding its
/// environment open until it ends.
final class ReadSnapshot: @unchecked Sendable {
    let handle: EnvHandle
    private var txn: OpaquePointer?

    init(_ handle: EnvHandle) throws {
        self.handle = handle
        try check(mdb_txn_begin(handle.env, nil, flag(MDB_RDONLY), &txn))
    }

    var read: Txn { Txn(ptr: txn!) }

    func end() {
        if let t = txn { mdb_txn_abort(t) }
        txn = nil
    }

    deinit { end() }
}

/// The copy's environment, opened by the defrag and used by one thread at a time.
final class CopyEnvironment: @unchecked Sendable {
    private(set) var env: OpaquePointer?

    init(_ directory: String, mapSize: Int) throws {
        env = try openEnvironment(directory, mapSize: mapSize, flags: flag(MDB_NOSYNC))
    }

    func close() {
        if let e = env { mdb_env_close(e) }
        env = nil
    }

    deinit { close() }
}

extension EmberStore {
    /// What the last online defrag did, nil before one finished.
    public var lastDefrag: DefragReport? { core.lastDefrag.withLock { $0 } }
    /// Whether a defrag is running now.
    public var defragRunning: Bool { core.defragRunning.load(ordering: .relaxed) }

    private var dataFileBytes: Int {
        (try? FileManager.default.attributesOfItem(atPath: directory + "/data.mdb")[.size] as? Int) ?? 0
    }

    /// The disk a defrag needs and what the filesystem has (nil: unknown).
    public func defragSpace() throws -> (needed: Int, available: Int?) {
        (Defrag.neededBytes(liveBytes: try footprint().liveBytes), Defrag.availableBytes(directory))
    }

    /// Rewrites the data file compactly while the store serves reads and writes, then switches
    /// to it (see `Defrag`). Throws `DefragError` (nothing changed) when there is no room, when
    /// another defrag runs, or when writes outrun the catch-up.
    @discardableResult
    public func defrag(options: DefragOptions = DefragOptions()) async throws -> DefragReport {
        guard core.defragRunning.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else {
            throw DefragError.busy("A defrag is already running on this node")
        }
        defer { core.defragRunning.store(false, ordering: .releasing) }
        let space = try defragSpace()
        if let available = space.available, available < space.needed {
            throw DefragError.insufficientSpace(needed: space.needed, available: available)
        }
        let before = dataFileBytes
        let work = directory + "/" + Defrag.workName
        let fm = FileManager.default
        try? fm.removeItem(atPath: work)
        try fm.createDirectory(atPath: work, withIntermediateDirectories: false)
        let target = try CopyEnvironment(work, mapSize: self.options.mapSize)
        var switched = false
        defer {
            target.close()
            if !switched {
                try? fm.removeItem(atPath: work)
                // Stop noting (nothing to do once the store closed).
                _ = enqueueExclusive { w in w.recording = nil }
            }
        }
        let names = Defrag.tableNames(tables)
        let started = DispatchTime.now().uptimeNanoseconds
        let first = try await perform { w -> ReadSnapshot in
            w.commitPending()
            w.recording = ChangedKeys()
            return try ReadSnapshot(w.store.environment.withLock { $0 })
        }
        try await Self.onOwnThread {
            defer { first.end() }
            try DenseCopy.copy(from: first.read, into: target.env!)
            self.core.afterDefragCopy.withLock { $0 }?()
        }
        var rounds = 0, caughtUp = 0
        while true {
            let step = try await perform { [directory, options, rounds] w -> DefragStep in
                w.commitPending()
                guard let noted = w.recording else { throw DefragError.gaveUp("the writer stopped noting changes") }
                if let why = noted.invalid { throw DefragError.gaveUp(why) }
                if noted.count > options.maxPauseKeys {
                    guard rounds < options.maxRounds else {
                        throw DefragError.gaveUp("writes outran \(rounds) catch-up rounds (\(noted.count) keys behind)")
                    }
                    w.recording = ChangedKeys()
                    return .round(noted, try ReadSnapshot(w.store.environment.withLock { $0 }))
                }
                let (pause, keys) = try w.switchToCopy(noted, target: target, directory: directory, names: names)
                return .switched(pause: pause, keys: keys)
            }
            switch step {
            case .round(let noted, let snap):
                caughtUp += try await Self.onOwnThread {
                    defer { snap.end() }
                    return try Defrag.catchUp(noted, from: snap.read, into: target.env!, names: names)
                }
                rounds += 1
            case .switched(let pause, let keys):
                switched = true
                let copyNanos = DispatchTime.now().uptimeNanoseconds - started - pause
                let report = DefragReport(bytesBefore: before, bytesAfter: dataFileBytes, pauseNanos: pause, copyNanos: copyNanos,
                                          caughtUpKeys: caughtUp + keys, pauseKeys: keys, rounds: rounds,
                                          finishedAtMs: Int64(Date().timeIntervalSince1970 * 1000))
                core.lastDefrag.withLock { $0 = report }
                return report
            }
        }
    }

    /// Runs `body` on a thread of its own (a copy takes seconds; it must not hold a cooperative thread).
    @discardableResult
    static func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (cont: CheckedContinuation<T, any Error>) in
            let t = Thread {
                do { cont.resume(returning: try body()) } catch { cont.resume(throwing: error) }
            }
            t.name = "ember-defrag-copy"
            t.start()
        }
    }
}

enum DefragStep: @unchecked Sendable {
    case round(ChangedKeys, ReadSnapshot)
    case switched(pause: UInt64, keys: Int)
}

extension Writer {
    /// The defrag's pause, on the writer thread (so nothing commits meanwhile): copies the last
    /// noted keys, then replaces the data file with the copy and the environment with one on it.
    /// Returns the pause and the keys copied in it.
    func switchToCopy(_ noted: ChangedKeys, target: CopyEnvironment, directory: String,
                      names: [MDB_dbi: String]) throws -> (UInt64, Int) {
        let start = DispatchTime.now().uptimeNanoseconds
        recording = nil
        let old = store.environment.withLock { $0 }
        // The link slot the old environment does not use; its lock file exists while an
        // environment of two defrags ago is still open (a long read on it).
        let slot = old.link == directory + "/" + Defrag.linkName(1) ? 0 : 1
        let link = directory + "/" + Defrag.linkName(slot)
        if FileManager.default.fileExists(atPath: link + "-lock") {
            throw DefragError.busy("A read from before the previous defrag still holds its environment; retry later")
        }
        let snap = try ReadSnapshot(old)
        let keys = try Defrag.catchUp(noted, from: snap.read, into: target.env!, names: names)
        snap.end()
        try check(mdb_env_sync(target.env!, 1))
        target.close()
        let dataFile = directory + "/data.mdb"
        guard rename(directory + "/" + Defrag.workName + "/data.mdb", dataFile) == 0 else {
            throw DefragError.gaveUp("cannot rename the copy over \(dataFile): errno \(errno)")
        }
        // From here on the new file is the data: a failure can only stop the process (the
        // restart opens the new file, which holds every committed write).
        do {
            try Self.syncDirectory(directory)
            unlink(link)
            guard symlink("data.mdb", link) == 0 else { throw StorageError.corrupt("cannot link \(link): errno \(errno)") }
            let e = try openEnvironment(link, mapSize: store.options.mapSize,
                                        flags: flag(MDB_NOSUBDIR) | (store.options.durable ? 0 : flag(MDB_NOSYNC)),
                                        maxReaders: store.options.maxReaders)
            let handle = EnvHandle(env: e, link: link)
            var t: OpaquePointer?
            try check(mdb_txn_begin(e, nil, 0, &t))
            let reopened = try Tables.open(t!, inlineObjects: tables.inlineObjects, orderedRecords: tables.orderedRecords,
                                             textRecords: tables.textRecords)
            try check(mdb_txn_commit(t))
            // Both environments opened the same names first, in the same order.
            guard reopened.sameHandles(tables) else { throw StorageError.corrupt("table handles differ after the defrag") }
            store.environment.withLock { $0 = handle }
        } catch {
            fatalError("defrag: the compacted file replaced the data file but cannot be opened: \(error)")
        }
        return (DispatchTime.now().uptimeNanoseconds - start, keys)
    }

    static func syncDirectory(_ directory: String) throws {
        let fd = open(directory, O_RDONLY | O_DIRECTORY)
        guard fd >= 0 else { throw StorageError.corrupt("cannot open \(directory): errno \(errno)") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw StorageError.corrupt("cannot sync \(directory): errno \(errno)") }
    }
}

extension Tables {
    func sameHandles(_ o: Tables) -> Bool {
        [tree, ver, idx, meta, treex, verx, idxx, idxloc, idxlocx, trigrec] + logRing
            == [o.tree, o.ver, o.idx, o.meta, o.treex, o.verx, o.idxx, o.idxloc, o.idxlocx, o.trigrec] + o.logRing
    }
}
