import CZlib
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A single node's log of the entries its point-in-time archive does not hold yet, kept in
/// plain append-only files beside LMDB instead of in LMDB's log table (issue 37,
/// `StoreOptions.archiveStaging`).
///
/// Why: a single node keeps no log otherwise (it restarts from its applied state). Kept in LMDB,
/// each commit's entries added ~18 % to the bytes LMDB wrote and synced, dirtied the log's last
/// leaf and branch pages, and their compaction later dirtied its first ones and the free list.
/// Here the same bytes are one sequential write and one `fdatasync` per commit, which runs on a
/// thread of its own while the writer applies the batch, and is waited for before the LMDB
/// commit: an entry LMDB holds as applied is always durable here too (after kill -9 or a power
/// loss), so the archive never has a gap the node could have filled. Entries past the applied
/// index (staged, then the commit did not happen) are cut off when the store opens.
///
/// Layout: `archive-staging/<first index, 20 digits>.stage`, each a run of records
/// `[index u64][length u32][crc32 of index, length and entry u32][entry]` (big-endian), the
/// entry as the log would store it (`LogEntry.encoded`). A segment is closed at
/// `segmentMaxBytes` or at a quarter of the hold in entries, so compaction (`drop`) removes
/// whole files and the staging keeps at most about 1.25 × `archiveHold` entries.
///
/// Threads: `stage`, `awaitStaged`, `committed`, `abandon` and `drop` run on the store's writer
/// thread only; `read` on any thread (it sees committed entries only).
final class StagingLog: @unchecked Sendable {
    static let directoryName = "archive-staging"
    static let fileSuffix = ".stage"
    static let headerBytes = 16
    /// A segment is closed once it holds this many bytes…
    static let segmentMaxBytes = 64 << 20
    /// Bytes read per `pread` when entries are read back.
    static let readChunk = 1 << 20
    /// The open segment is written with zeros this far ahead of its records: a commit's sync
    /// then only overwrites allocated blocks (no size change: on ext4 and XFS `fdatasync` then
    /// needs no journal commit), one file-size change per this many bytes instead of per commit.
    static let zeroAhead = 4 << 20

    let directory: String
    let durable: Bool
    /// Largest entry a record may hold (`StoreOptions.maxEntryBytes`): a larger length is damage.
    let maxEntryBytes: Int
    /// …or this many entries (a quarter of the hold).
    let segmentMaxEntries: UInt64

    struct Shared {
        /// First indexes of the segment files, ascending (consecutive: each begins after the last
        /// entry of the one before).
        var segments: [UInt64] = []
        /// Last entry whose LMDB commit happened: readers read no further.
        var through: UInt64 = 0
    }
    let shared = Mutex(Shared())

    // The writer thread's own state.
    private var fd: Int32 = -1
    private var segmentFirst: UInt64 = 0
    private var segmentEntries: UInt64 = 0
    private var committedOffset = 0
    /// How far the open segment's file is written (records, then zeros).
    private var allocatedEnd = 0
    private var committedLast: UInt64 = 0
    /// The staged, not yet committed batch: its end offset, last index and count.
    private var pending: (offset: Int, last: UInt64, count: UInt64)?
    private var staged: StagedResult?
    private let sync = StagingSync()
    /// Where the last read stopped (the archiver reads on from there): its segment, open.
    let readCursor = Mutex<ReadCursor?>(nil)

    /// Opens the staging in `storeDirectory`, cut to `applied`: records past it (staged for a
    /// commit that did not happen) and anything unreadable after the last good record go. When
    /// what is left does not reach `applied` (the node ran without it meanwhile), all of it
    /// goes: the archive then finds its next entry gone, as after a compaction past the hold.
    init(storeDirectory: String, applied: UInt64, durable: Bool, maxEntryBytes: Int, hold: UInt64) throws {
        directory = storeDirectory + "/" + Self.directoryName
        self.durable = durable
        self.maxEntryBytes = maxEntryBytes
        segmentMaxEntries = max(1, hold / 4)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var firsts = try Self.listSegments(directory)
        var expected = firsts.first ?? applied + 1
        var kept: [UInt64] = []
        var lastOffset = 0, lastCount: UInt64 = 0
        while let first = firsts.first {
            firsts.removeFirst()
            guard first == expected, expected <= applied else {
                try Self.remove(path(first))
                continue
            }
            let f = open(path(first), O_RDWR | O_CLOEXEC)
            guard f >= 0 else { throw Self.ioError("open \(path(first))") }
            defer { Glibc.close(f) }
            var end = 0, count: UInt64 = 0
            try Self.scan(f, from: 0, maxEntryBytes: maxEntryBytes) { index, _, next in
                guard index == expected, index <= applied else { return false }
                expected += 1
                count += 1
                end = next
                return true
            }
            if count == 0 {
                try Self.remove(path(first))
                continue
            }
            // Cut what follows the last record kept (torn, or staged for a commit that failed).
            guard ftruncate(f, off_t(end)) == 0, !durable || fsync(f) == 0 else { throw Self.ioError("truncate \(path(first))") }
            kept.append(first)
            lastOffset = end
            lastCount = count
        }
        if !kept.isEmpty && expected != applied + 1 {
            for f in kept { try Self.remove(path(f)) }
            kept = []
        }
        committedLast = applied
        if let last = kept.last {
            fd = open(path(last), O_RDWR | O_CLOEXEC)
            guard fd >= 0 else { throw Self.ioError("open \(path(last))") }
            segmentFirst = last
            segmentEntries = lastCount
            committedOffset = lastOffset
            allocatedEnd = lastOffset
        }
        shared.withLock { $0 = Shared(segments: kept, through: applied) }
        sync.start()
    }

    deinit { close() }

    func close() {
        sync.stop()
        if fd >= 0 { Glibc.close(fd); fd = -1 }
        readCursor.withLock { c in
            if let fd = c?.fd { Glibc.close(fd) }
            c = nil
        }
    }

    func path(_ first: UInt64) -> String { directory + "/" + Self.name(first) }

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

    static func remove(_ path: String) throws {
        guard unlink(path) == 0 || errno == ENOENT else { throw ioError("remove \(path)") }
    }

    /// An I/O failure as the store reports it (ENOSPC and EDQUOT raise the NOSPACE alarm).
    static func ioError(_ what: String) -> StorageError {
        let e = errno
        return .lmdb(code: e, message: "archive staging: \(what): \(String(cString: strerror(e)))")
    }

    /// First index the staging holds (the log's first index for the archive), or the next one.
    var firstIndex: UInt64 { shared.withLock { $0.segments.first ?? $0.through + 1 } }

    // MARK: - Writing (the writer thread)

    /// Starts writing `entries` (the next ones after the last committed, consecutive) and
    /// syncing them on the staging thread; `awaitStaged` waits for that before the LMDB commit.
    func stage(_ entries: [(index: UInt64, bytes: [UInt8])]) {
        precondition(staged == nil && pending == nil, "one staged batch at a time")
        guard let head = entries.first else { return }
        precondition(head.index == committedLast + 1, "staged entries continue the committed ones")
        let result = StagedResult()
        staged = result
        do {
            if fd < 0 || segmentEntries >= segmentMaxEntries || committedOffset >= Self.segmentMaxBytes { try roll(at: head.index) }
        } catch {
            result.finish(error)
            return
        }
        let bytes = entries.reduce(0) { $0 + Self.headerBytes + $1.bytes.count }
        let end = committedOffset + bytes
        pending = (end, entries.last!.index, UInt64(entries.count))
        var zeros = 0..<0
        if end > allocatedEnd {
            zeros = allocatedEnd..<((end + Self.zeroAhead - 1) / Self.zeroAhead * Self.zeroAhead + Self.zeroAhead)
            allocatedEnd = zeros.upperBound
        }
        sync.submit(StagingSync.Job(fd: fd, offset: committedOffset, entries: entries, zeros: zeros, durable: durable, result: result))
    }

    /// Waits until the staged batch is on disk (idempotent: a transaction redone waits again).
    func awaitStaged() throws {
        guard let staged else { return }
        try staged.wait()
    }

    /// The batch's LMDB commit happened: its entries are readable.
    func committed() {
        guard let p = pending else { return }
        staged = nil
        pending = nil
        committedOffset = p.offset
        committedLast = p.last
        segmentEntries += p.count
        shared.withLock { $0.through = p.last }
    }

    /// The batch was not committed: the next one is written over it.
    func abandon() {
        if let staged { staged.waitQuietly() }
        staged = nil
        pending = nil
        allocatedEnd = committedOffset  // its zeros may be missing: written again next time
    }

    /// Removes the segments whose every entry is at or below `index` (never the open one).
    func drop(through index: UInt64) {
        let victims: [UInt64] = shared.withLock { s in
            var out: [UInt64] = []
            while s.segments.count > 1, s.segments[1] <= index + 1 { out.append(s.segments.removeFirst()) }
            return out
        }
        // A reader with one of them open keeps reading it; one that opens it later finds it gone.
        for f in victims { try? Self.remove(path(f)) }
    }

    /// Starts a new segment at `first` (its name) and makes its directory entry durable.
    private func roll(at first: UInt64) throws {
        let f = open(path(first), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard f >= 0 else { throw Self.ioError("create \(path(first))") }
        if durable {
            let d = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            defer { if d >= 0 { Glibc.close(d) } }
            guard d >= 0, fsync(d) == 0 else {
                Glibc.close(f)
                throw Self.ioError("sync \(directory)")
            }
        }
        if fd >= 0 { Glibc.close(fd) }
        fd = f
        segmentFirst = first
        segmentEntries = 0
        committedOffset = 0
        allocatedEnd = 0
        shared.withLock { s in if s.segments.last != first { s.segments.append(first) } }
    }

    // MARK: - Records

    static func header(index: UInt64, length: Int) -> [UInt8] {
        var h = [UInt8](repeating: 0, count: headerBytes)
        for k in 0..<8 { h[k] = UInt8(truncatingIfNeeded: index >> UInt64(56 - 8 * k)) }
        for k in 0..<4 { h[8 + k] = UInt8(truncatingIfNeeded: UInt32(length) >> UInt32(24 - 8 * k)) }
        return h
    }

    static func checksum(header: UnsafeRawBufferPointer, entry: UnsafeRawBufferPointer) -> UInt32 {
        var c = crc32(0, header.bindMemory(to: Bytef.self).baseAddress, 12)
        c = crc32(c, entry.bindMemory(to: Bytef.self).baseAddress, uInt(entry.count))
        return UInt32(truncatingIfNeeded: c)
    }

    /// Calls `body` with each whole, intact record from `offset` on (index, entry, the offset
    /// after it) until it returns false, the file ends, or a record is torn or damaged.
    static func scan(_ fd: Int32, from offset: Int, maxEntryBytes: Int,
                     _ body: (UInt64, UnsafeRawBufferPointer, Int) throws -> Bool) throws {
        var buffer = [UInt8](repeating: 0, count: readChunk)
        var base = offset  // file offset of buffer[0]
        var filled = 0
        var at = 0  // next record's position in the buffer
        while true {
            // Enough bytes for the next header and entry in the buffer, reading more if needed.
            func ensure(_ need: Int) throws -> Bool {
                if at + need <= filled { return true }
                if at > 0 {
                    buffer.withUnsafeMutableBytes { b in
                        _ = memmove(b.baseAddress!, b.baseAddress! + at, filled - at)
                    }
                    base += at; filled -= at; at = 0
                }
                if need > buffer.count { buffer.append(contentsOf: repeatElement(0, count: need - buffer.count)) }
                while filled < need {
                    let n = buffer.withUnsafeMutableBytes { b in
                        pread(fd, b.baseAddress! + filled, b.count - filled, off_t(base + filled))
                    }
                    if n < 0 { if errno == EINTR { continue }; throw ioError("read") }
                    if n == 0 { return false }
                    filled += n
                }
                return true
            }
            guard try ensure(headerBytes) else { return }
            let (index, length, crc) = buffer.withUnsafeBytes { b -> (UInt64, Int, UInt32) in
                var i: UInt64 = 0, n: UInt32 = 0, c: UInt32 = 0
                for k in 0..<8 { i = i << 8 | UInt64(b[at + k]) }
                for k in 8..<12 { n = n << 8 | UInt32(b[at + k]) }
                for k in 12..<16 { c = c << 8 | UInt32(b[at + k]) }
                return (i, Int(n), c)
            }
            guard length >= 1, length <= maxEntryBytes, try ensure(headerBytes + length) else { return }
            let go = try buffer.withUnsafeBytes { b -> Bool? in
                let h = UnsafeRawBufferPointer(rebasing: b[at..<(at + headerBytes)])
                let e = UnsafeRawBufferPointer(rebasing: b[(at + headerBytes)..<(at + headerBytes + length)])
                guard checksum(header: h, entry: e) == crc else { return nil }
                return try body(index, e, base + at + headerBytes + length)
            }
            guard let go, go else { return }
            at += headerBytes + length
        }
    }
}

/// A staged batch's outcome, handed from the staging thread to the writer.
final class StagedResult: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private let error = Mutex<(any Error)?>(nil)
    private let finished = Atomic<Bool>(false)

    func finish(_ e: (any Error)?) {
        error.withLock { $0 = e }
        done.signal()
    }

    func wait() throws {
        if !finished.load(ordering: .acquiring) {
            done.wait()
            finished.store(true, ordering: .releasing)
        }
        if let e = error.withLock({ $0 }) { throw e }
    }

    func waitQuietly() { _ = try? wait() }
}

/// The staging's thread: writes a batch's records and syncs them while the writer applies it.
final class StagingSync: @unchecked Sendable {
    struct Job {
        let fd: Int32
        let offset: Int
        let entries: [(index: UInt64, bytes: [UInt8])]
        /// File range to write with zeros first (`StagingLog.zeroAhead`).
        var zeros: Range<Int> = 0..<0
        let durable: Bool
        let result: StagedResult
    }
    private let jobs = Mutex<(job: Job?, stopping: Bool)>((nil, false))
    private let wake = DispatchSemaphore(value: 0)
    private let stopped = DispatchSemaphore(value: 0)
    private let running = Atomic<Bool>(false)

    func start() {
        guard !running.exchange(true, ordering: .relaxed) else { return }
        let t = Thread { [self] in
            while true {
                wake.wait()
                let (job, stopping) = jobs.withLock { s in defer { s.job = nil }; return (s.job, s.stopping) }
                if let job { job.result.finish(Self.run(job)) }
                if stopping { break }
            }
            stopped.signal()
        }
        t.name = "ember-archive-staging"
        t.start()
    }

    func submit(_ job: Job) {
        jobs.withLock { $0.job = job }
        wake.signal()
    }

    func stop() {
        guard running.exchange(false, ordering: .relaxed) else { return }
        jobs.withLock { $0.stopping = true }
        wake.signal()
        stopped.wait()
    }

    static func run(_ job: Job) -> (any Error)? {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(job.entries.reduce(0) { $0 + StagingLog.headerBytes + $1.bytes.count })
        for e in job.entries {
            var h = StagingLog.header(index: e.index, length: e.bytes.count)
            let crc = h.withUnsafeBytes { hb in e.bytes.withUnsafeBytes { StagingLog.checksum(header: hb, entry: $0) } }
            for k in 0..<4 { h[12 + k] = UInt8(truncatingIfNeeded: crc >> UInt32(24 - 8 * k)) }
            buffer.append(contentsOf: h)
            buffer.append(contentsOf: e.bytes)
        }
        if !job.zeros.isEmpty {
            let zero = [UInt8](repeating: 0, count: min(job.zeros.count, StagingLog.readChunk))
            var at = job.zeros.lowerBound
            while at < job.zeros.upperBound {
                let n = zero.withUnsafeBytes { b in pwrite(job.fd, b.baseAddress!, min(b.count, job.zeros.upperBound - at), off_t(at)) }
                if n < 0 { if errno == EINTR { continue }; return StagingLog.ioError("write") }
                at += n
            }
        }
        var done = 0
        while done < buffer.count {
            let n = buffer.withUnsafeBytes { b in pwrite(job.fd, b.baseAddress! + done, b.count - done, off_t(job.offset + done)) }
            if n < 0 { if errno == EINTR { continue }; return StagingLog.ioError("write") }
            done += n
        }
        if job.durable && fdatasync(job.fd) != 0 { return StagingLog.ioError("sync") }
        return nil
    }
}
