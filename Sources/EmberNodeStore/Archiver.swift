import Dispatch
import EmberCore
import EmberStorage
import Foundation
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Settings of the point-in-time archive (`emberd --archive DIR`).
public struct ArchiveOptions: Sendable {
    /// Where the archive is: a directory, or an object store's location (`s3://bucket/prefix`).
    public var directory: String
    /// The archive's objects when they are not in `directory` (an object store: EmberArchiveS3).
    public var store: (any ArchiveStore)? = nil
    /// What retention keeps (the restorable window), and how often a base snapshot is written.
    public var retentionSeconds: Double = 7 * 86_400
    public var baseEverySeconds: Double = 6 * 3_600
    /// A segment is closed at this many entry bytes…
    public var segmentMaxBytes: Int = 16 << 20
    /// …or when its oldest entry is this old (how much a lost archive writer can leave unarchived).
    public var segmentMaxAgeSeconds: Double = 60
    /// How often the archiver looks for newly applied entries.
    public var pollMilliseconds: Int = 200
    /// A segment closed by its size records the state hash (a full scan of the state) only once
    /// the entry bytes archived since the last recorded hash reach this many times the bytes that
    /// hash scanned: on a saturated leader the hash then costs at most 1/`hashSpacing` state
    /// bytes scanned per archived entry byte, whatever the state's size (hashing at every 16 MiB
    /// close scans a 1 GB state 64 times per GB archived). Segments closed by age (at most one per
    /// `segmentMaxAgeSeconds`) and at a stop always record it; restore checks the hash where a
    /// segment has one (`ArchiveRestore`). 0 (the default): every segment records it, the
    /// exactness proof issue 37 asks for at each segment's end; spacing trades it away on a
    /// large state written fast (no flag yet: an incremental state hash is the better answer).
    public var hashSpacing: Double = 0
    /// The archiver thread's nice value (Linux: per thread). Its work — the state hash at segment
    /// closes, compression, checksums, bases — is background work: on a saturated leader
    /// the writer and the requests get the CPU first, and the archive catches up when they leave
    /// some (its lag is in status and metrics; `StoreOptions.archiveHold` keeps what it lacks).
    public var threadNice: Int32 = 5
    /// Entries read from the log per read transaction.
    public static let readBatch = 1_000
    /// How long a mark (`.archived` entry) may take to commit before the archiver gives up its turn.
    public static let markTimeoutSeconds = 30.0

    public init(directory: String) { self.directory = directory }
}

/// The archive's figures for `/.ember/status`, `/metrics` and `ember status`.
public struct ArchiveStatus: Sendable {
    public var location: String
    /// This node writes the archive (the leader; a single node always).
    public var active: Bool
    public var archivedThrough: UInt64
    public var appliedIndex: UInt64
    /// Applied entries the archive does not hold yet, and the age of the oldest of them.
    public var lagEntries: UInt64
    public var lagSeconds: Double
    public var lastSegment: String?
    public var lastSegmentAtMs: Int64?
    public var lastBase: String?
    public var lastBaseAtMs: Int64?
    /// The oldest restorable time (the oldest base's), as of this node's last listing.
    public var windowStartMs: Int64?
    /// Entries compacted before they were archived (the hold limit was passed): `from...to`.
    public var gaps: [String]
    public var lastError: String?
    /// CPU time the archiver's thread has used on this node (reading entries, compressing and
    /// storing segments, state hashes, bases): what archiving costs besides the log rows the
    /// writer keeps. Cumulative over the node's run, as of the thread's last turn.
    public var cpuSeconds: Double = 0
    /// Entries through this index that the archive lacks are only marks and no-ops (an idle
    /// archive: they wait for the next real entry); not lag.
    var idleThrough: UInt64 = 0

    public var json: JSON {
        var o: KeyMap<JSON> = [
            "location": .string(location), "active": .bool(active), "archivedThrough": .int(Int64(archivedThrough)),
            "lagEntries": .int(Int64(lagEntries)), "lagSeconds": .double(lagSeconds),
            "gaps": .array(gaps.map { .string($0) }),
        ]
        o["lastSegment"] = lastSegment.map { .string($0) } ?? .null
        o["lastSegmentAt"] = lastSegmentAtMs.map { .string(ArchiveTime.format($0)) } ?? .null
        o["lastBase"] = lastBase.map { .string($0) } ?? .null
        o["lastBaseAt"] = lastBaseAtMs.map { .string(ArchiveTime.format($0)) } ?? .null
        o["windowStart"] = windowStartMs.map { .string(ArchiveTime.format($0)) } ?? .null
        o["lastError"] = lastError.map { .string($0) } ?? .null
        return .object(o)
    }
}

public protocol ArchivePort: Sendable {
    func archiveStatus() -> ArchiveStatus
}

/// Writes the point-in-time archive while this node leads: committed log entries, read back
/// from the store's log once applied, into segments (`ArchiveSegment`), each closed at a size
/// or an age with the state hash at its last entry; a base snapshot (the backup format) when it
/// starts and every `baseEverySeconds`; retention after each base. After a segment is stored,
/// a `.archived(through:)` entry is logged: the position is replicated, so a new leader goes on
/// from it (adopting segments its predecessor stored but could not mark: no gap, no overlap),
/// and every member's log holds what the archive lacks (`StoreOptions.archiveHold`).
///
/// Runs on a thread of its own: its work is file I/O, fsyncs and full-state scans.
public final class Archiver: ArchivePort, Sendable {
    let store: EmberStore
    let archive: any ArchiveStore
    let options: ArchiveOptions
    let logger: Logger
    let isLeader: @Sendable () -> Bool
    let mark: @Sendable (UInt64) async throws -> Void
    let now: @Sendable () -> Int64

    private struct Shared {
        var stopping = false
        var status: ArchiveStatus
    }
    private let shared: Mutex<Shared>
    private let wake = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)
    private let started = Atomic<Bool>(false)
    /// The thread's CPU time in nanoseconds as of its last turn (`ArchiveStatus.cpuSeconds`).
    private let cpuNanos = Atomic<UInt64>(0)

    /// `mark` logs `.archived(through:)` and returns once it is applied here.
    public init(store: EmberStore, archive: any ArchiveStore, options: ArchiveOptions, logger: Logger,
                isLeader: @escaping @Sendable () -> Bool, mark: @escaping @Sendable (UInt64) async throws -> Void,
                now: @escaping @Sendable () -> Int64 = { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }) {
        self.store = store
        self.archive = archive
        self.options = options
        self.logger = logger
        self.isLeader = isLeader
        self.mark = mark
        self.now = now
        shared = Mutex(Shared(status: ArchiveStatus(location: archive.location, active: false, archivedThrough: 0, appliedIndex: 0,
                                                   lagEntries: 0, lagSeconds: 0, gaps: [])))
    }

    public func start() {
        guard !started.exchange(true, ordering: .relaxed) else { return }
        let t = Thread { [self] in
            Self.lowerPriority(options.threadNice)
            var run = Run()
            while true {
                _ = wake.wait(timeout: .now() + .milliseconds(options.pollMilliseconds))
                if shared.withLock({ $0.stopping }) { break }
                step(&run)
                cpuNanos.store(Self.threadCPUNanos(), ordering: .relaxed)
            }
            // An orderly stop stores what is pending (a single node's last writes), unmarked: the
            // members may be stopping too, and whoever archives next adopts it (`begin`).
            // (Begun first if the node stops before the thread's first turn.)
            if isLeader() {
                if !run.active { try? begin(&run) }
                if run.active { try? closeSegment(&run, mark: false) }
            }
            cpuNanos.store(Self.threadCPUNanos(), ordering: .relaxed)
            done.signal()
        }
        t.name = "ember-archiver"
        t.start()
    }

    /// Sets the calling thread's nice value (Linux keeps one per thread; `who` 0 is the caller).
    static func lowerPriority(_ nice: Int32) {
        #if os(Linux)
        if nice != 0 { _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, nice) }
        #endif
    }

    /// CPU time of the calling thread (the archiver's own work, whatever else the node does).
    static func threadCPUNanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// `stopBlocking` from a thread of its own (it may wait for a mark to commit).
    public func stop() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread { [self] in
                stopBlocking()
                c.resume()
            }
        }
    }

    /// Stops the thread after it stored the open segment (when this node leads).
    public func stopBlocking() {
        guard started.load(ordering: .relaxed) else { return }
        let first = shared.withLock { s in
            defer { s.stopping = true }
            return !s.stopping
        }
        guard first else { return }
        wake.signal()
        done.wait()
    }

    public func archiveStatus() -> ArchiveStatus {
        var s = shared.withLock { $0.status }
        // The thread notices a lost leadership at its next turn (or after a mark in flight fails).
        s.active = s.active && isLeader()
        let applied = store.appliedIndex
        s.archivedThrough = max(s.archivedThrough, (try? store.archivedThrough()) ?? 0)
        s.appliedIndex = applied
        s.cpuSeconds = Double(cpuNanos.load(ordering: .relaxed)) / 1e9
        s.lagEntries = applied > s.archivedThrough && s.idleThrough < applied ? applied - s.archivedThrough : 0
        return s
    }

    // MARK: - The loop

    /// The leader's archiving state (the thread's own).
    struct Run {
        var active = false
        /// Next index to read from the log.
        var next: UInt64 = 1
        /// The open segment's entries, and their bytes.
        var segment = ArchiveSegmentBuilder()
        var bytes: Int { segment.entryBytes }
        /// Time of the oldest buffered entry that is more than a mark or a no-op.
        var oldestContent: Int64? = nil
        var lastBaseAt: Int64 = 0
        var lastBaseIndex: UInt64? = nil
        /// Entry bytes stored since the last segment that recorded the state hash, and the bytes
        /// that hash scanned (`ArchiveOptions.hashSpacing`).
        var bytesSinceHash = 0
        var lastHashScanned = 0
    }

    /// Pause after a failed step (an unreachable archive volume) before trying again.
    static let retryPauseSeconds = 1.0

    func step(_ run: inout Run) {
        guard isLeader() else {
            if run.active { logger.info("archive: not the leader any more; another member continues it") }
            run = Run()
            update { $0.active = false; $0.lagSeconds = 0; $0.idleThrough = 0 }
            return
        }
        do {
            if !run.active { try begin(&run) }
            try readNew(&run)
            if let oldest = run.oldestContent {
                let old = Double(now() - oldest) >= options.segmentMaxAgeSeconds * 1000
                if old || run.bytes >= options.segmentMaxBytes { try closeSegment(&run, hash: old || hashDue(run)) }
            }
            if Double(now() - run.lastBaseAt) >= options.baseEverySeconds * 1000 { try writeBase(&run) }
            let lag = run.oldestContent.map { Double(max(0, now() - $0)) / 1000 } ?? 0
            let idle = run.oldestContent == nil ? run.next - 1 : 0
            update { $0.lagSeconds = lag; $0.lastError = nil; $0.idleThrough = idle }
        } catch {
            logger.warning("archive: \(error)", metadata: ["archive": "\(archive.location)"])
            update { $0.lastError = "\(error)" }
            // Start over from the replicated position (the store's log still holds the entries);
            // the base schedule stays.
            let (lastBase, lastBaseIndex) = (run.lastBaseAt, run.lastBaseIndex)
            run = Run()
            run.lastBaseAt = lastBase
            run.lastBaseIndex = lastBaseIndex
            Thread.sleep(forTimeInterval: Self.retryPauseSeconds)
        }
    }

    /// Taking over: the replicated position, plus segments a predecessor stored but could not
    /// mark (they continue it without a gap); then a base.
    func begin(_ run: inout Run) throws {
        var through = try store.archivedThrough()
        let catalog = ArchiveCatalog(names: try archive.list())
        (archive as? DirectoryArchiveStore)?.removeStaleTemporaries(olderThan: 3_600)
        let adopted = catalog.continuousEnd(after: through)
        if adopted > through {
            logger.info("archive: continuing after segments already stored", metadata: ["through": "\(adopted)"])
            try markSync(adopted)
            through = adopted
        }
        // What a predecessor left holding entries twice (it may have stopped before it looked).
        if !catalog.overlaps.isEmpty { cleanUpOverlaps() }
        run.active = true
        run.next = through + 1
        update { $0.active = true; $0.archivedThrough = through }
        // A base when this node starts to archive (unless a failed step only started over).
        if run.lastBaseAt == 0 || Double(now() - run.lastBaseAt) >= options.baseEverySeconds * 1000 { try writeBase(&run) }
        if run.next < store.firstLogIndex && run.next <= store.appliedIndex {
            // The log does not hold what follows the archive's position: the node never archived
            // before (nothing to continue), or it compacted past the hold (a gap in a chain).
            try restartFromBase(&run, reportGap: catalog.segments.contains { $0.last == through })
        }
        logger.info("archive: writing", metadata: ["archive": "\(archive.location)", "from": "\(run.next)"])
    }

    /// Reads applied entries into the open segment (up to its size limit), each copied once from
    /// the log's pages into the segment's block, `readBatch` per read transaction.
    func readNew(_ run: inout Run) throws {
        var applied = store.appliedIndex
        while run.next <= applied && run.bytes < options.segmentMaxBytes {
            var oldest = run.oldestContent
            let now = self.now
            let got = try store.appendEncodedEntries(from: run.next, through: applied, maxCount: ArchiveOptions.readBatch,
                                                     maxBytes: options.segmentMaxBytes, into: &run.segment) { _, bytes in
                // Marks and no-ops alone never make a segment due (an idle archive stays idle).
                if oldest == nil, let entry = try? LogEntry(decoding: Array(bytes)) {
                    switch entry.operation {
                    case .noop, .archived: break
                    default: oldest = entry.timestamp > 0 ? entry.timestamp : now()
                    }
                }
            }
            run.oldestContent = oldest
            guard got > 0 else {
                try skipGap(&run)
                applied = store.appliedIndex
                continue
            }
            run.next += UInt64(got)
        }
    }

    /// The log no longer holds the next entry (compacted past `archiveHold`): store what is
    /// buffered, report the gap, and start again from a new base.
    func skipGap(_ run: inout Run) throws { try restartFromBase(&run, reportGap: true) }

    func restartFromBase(_ run: inout Run, reportGap: Bool) throws {
        let from = run.next
        if !run.segment.isEmpty { try storeSegment(&run, hash: "") }
        // The base written when this node began serves when the log holds what follows it.
        let base = run.lastBaseIndex.map { $0 + 1 >= store.firstLogIndex } == true ? run.lastBaseIndex! : try writeBase(&run)
        if reportGap {
            let gap = "\(from)...\(base)"
            logger.error("archive: entries were compacted before they were archived; restores cannot cross this gap",
                         metadata: ["entries": "\(gap)"])
            update { $0.gaps.append(gap) }
        }
        try markSync(base)
        run.next = base + 1
    }

    /// A segment closed by size records the hash once enough entry bytes followed the last one.
    func hashDue(_ run: Run) -> Bool {
        Double(run.bytesSinceHash + run.bytes) >= options.hashSpacing * Double(run.lastHashScanned)
    }

    /// Closes the open segment: with `hash`, at the applied index with the state hash there;
    /// without, at the last entry read.
    func closeSegment(_ run: inout Run, mark: Bool = true, hash withHash: Bool = true) throws {
        guard withHash else {
            guard !run.segment.isEmpty else { return }
            return try storeSegment(&run, hash: "", mark: mark)
        }
        let (at, hash, scanned) = try store.measuredStateHashAtApplied()
        run.lastHashScanned = scanned
        if at >= run.next {
            // Everything through `at`, whatever the size: the hash is the state there.
            while run.next <= at {
                let got = try store.appendEncodedEntries(from: run.next, through: at, maxCount: ArchiveOptions.readBatch, into: &run.segment)
                guard got > 0 else { break }
                run.next += UInt64(got)
            }
        }
        guard !run.segment.isEmpty else { return }
        try storeSegment(&run, hash: run.segment.last == at ? hash : "", mark: mark)
    }

    func storeSegment(_ run: inout Run, hash: String, mark: Bool = true) throws {
        // Entries another writer stored meanwhile (a deposed leader that had not noticed yet):
        // its segment stays, this one starts after it (no entry is archived twice).
        if !run.segment.isEmpty, case let first = run.segment.first,
           let other = ArchiveCatalog(names: try archive.list()).segments
            .filter({ $0.first <= first && $0.last >= first }).max(by: { $0.last < $1.last }) {
            logger.info("archive: entries already stored by another writer", metadata: ["segment": "\(other.name)"])
            run.segment.removeThrough(other.last)
            if run.segment.isEmpty {
                if mark { try markSync(other.last) }
                run.oldestContent = nil
                if run.next <= other.last { run.next = other.last + 1 }
                return
            }
        }
        let (name, last, entryBytes) = (run.segment.name, run.segment.last!, run.bytes)
        // A leader deposed meanwhile (by a transfer it made, a removal) stores nothing more: the
        // new leader goes on from the replicated position.
        guard isLeader() else { throw ArchiveError("not the leader any more: \(name) not stored") }
        try archive.put(name, bytes: run.segment.encoded(stateHash: hash))
        if mark { try markSync(last) }
        cleanUpOverlaps()
        run.segment.reset()
        run.bytesSinceHash = hash.isEmpty ? run.bytesSinceHash + entryBytes : 0
        run.oldestContent = nil
        let at = now()
        update { s in
            s.lastSegment = name
            s.lastSegmentAtMs = at
            s.archivedThrough = max(s.archivedThrough, last)
        }
    }

    /// A deposed leader that had not noticed yet may store a segment after this writer checked
    /// the listing (`storeSegment`): entries stored twice, inside a segment or across two. The
    /// catalog's cleanup (`ArchiveCatalog.cleanup`) is applied once every segment that stays and
    /// holds entries of a changed range reads back whole: segments the others cover are removed,
    /// a partial overlap is trimmed off the later segment (its end and its state hash stay; the
    /// trimmed copy is stored before the original goes, so no entry is ever missing). Best
    /// effort: the next stored segment, and the next writer's `begin`, look again.
    func cleanUpOverlaps() {
        guard let names = try? archive.list() else { return }
        let catalog = ArchiveCatalog(names: names)
        let plan = catalog.cleanup
        guard !plan.isEmpty else { return }
        let removed = Set(plan.remove.map(\.name))
        let changed = plan.remove + plan.trim.map(\.segment)
        var read: [String: ArchiveSegment] = [:]
        for s in catalog.segments where !removed.contains(s.name) && changed.contains(where: { s.first <= $0.last && $0.first <= s.last }) {
            guard let seg = try? ArchiveSegment(decoding: archive.get(s.name)), seg.name == s.name else {
                logger.warning("archive: a segment does not read back whole; overlapping segments stay", metadata: ["segment": "\(s.name)"])
                return
            }
            read[s.name] = seg
        }
        do {
            for s in plan.remove {
                try archive.delete(s.name)
                logger.info("archive: removed a segment others hold entirely", metadata: ["segment": "\(s.name)"])
            }
            for t in plan.trim {
                guard let seg = read[t.segment.name], t.from > seg.first, t.from <= seg.last else { continue }
                let kept = seg.entries.enumerated().dropFirst(Int(t.from - seg.first)).map { (index: seg.first + UInt64($0.offset), bytes: $0.element) }
                let trimmed = try ArchiveSegment(entries: kept, stateHash: seg.stateHash)
                try archive.put(trimmed.name, bytes: trimmed.encoded())
                try archive.delete(seg.name)
                logger.info("archive: trimmed a segment that began inside the one before it", metadata: ["segment": "\(seg.name)", "now": "\(trimmed.name)"])
            }
        } catch {
            logger.warning("archive: cannot clean up overlapping segments: \(error)")
        }
    }

    /// Writes a base snapshot of the current state, then applies retention. Returns its index.
    @discardableResult
    func writeBase(_ run: inout Run) throws -> UInt64 {
        let local = store.directory + "/archive-base.partial"
        defer { try? FileManager.default.removeItem(atPath: local) }
        let summary = try store.writeBackup(to: local)
        let name = ArchiveName.base(index: summary.appliedIndex, timestamp: summary.lastTimestamp)
        try archive.putFile(name, from: local)
        let at = now()
        run.lastBaseAt = at
        run.lastBaseIndex = summary.appliedIndex
        update { $0.lastBase = name; $0.lastBaseAtMs = at }
        try applyRetention()
        return summary.appliedIndex
    }

    func applyRetention() throws {
        let catalog = ArchiveCatalog(names: try archive.list())
        let expired = catalog.expired(now: now(), retentionMs: Int64(options.retentionSeconds * 1000))
        for name in expired { try archive.delete(name) }
        if !expired.isEmpty { logger.info("archive: retention removed \(expired.count) objects") }
        let kept = ArchiveCatalog(names: try archive.list())
        update { $0.windowStartMs = kept.bases.first?.lastTimestamp }
    }

    /// Logs the mark and waits for it (from this thread, off Swift's cooperative pool).
    func markSync(_ index: UInt64) throws {
        let result = MarkResult()
        let mark = self.mark
        Task {
            do { try await mark(index) } catch { result.error.withLock { $0 = error } }
            result.done.signal()
        }
        // Waits in slices: a stopping node does not wait for a mark its stopping peers cannot
        // commit (the segment is stored; whoever archives next adopts it).
        let deadline = Date().addingTimeInterval(ArchiveOptions.markTimeoutSeconds)
        while result.done.wait(timeout: .now() + .milliseconds(100)) != .success {
            if shared.withLock({ $0.stopping }) { throw ArchiveError("stopping before the archive mark through \(index) committed") }
            if Date() > deadline {
                throw ArchiveError("the archive mark through \(index) did not commit in \(Int(ArchiveOptions.markTimeoutSeconds)) s")
            }
        }
        if let e = result.error.withLock({ $0 }) { throw e }
        update { $0.archivedThrough = max($0.archivedThrough, index) }
    }

    /// The namespace `.archived` entries are logged in (any valid one: a mark touches no data).
    public static let markNamespace = "default"

    private func update(_ f: (inout ArchiveStatus) -> Void) { shared.withLock { f(&$0.status) } }
}

/// A mark's outcome, handed from its task to the archiver's thread.
final class MarkResult: Sendable {
    let error = Mutex<(any Error)?>(nil)
    let done = DispatchSemaphore(value: 0)
}
