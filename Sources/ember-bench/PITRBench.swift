import ArgumentParser
import EmberCore
import EmberNodeStore
import EmberStorage
import Foundation
import Logging

/// `ember-bench pitr`: what the point-in-time archive (issue 37) costs and how fast a restore
/// replays, in process over real LMDB stores and a real archive directory:
/// 1. N small writes from concurrent submitters into a store without the archive, then into one
///    with it (as a single node: the entries it lacks kept as log rows in each batch's own
///    transaction; the archiver thread writing segments): the throughput and CPU per write of each, in one
///    run on the same machine (goal: ≤ 5 % less with the archive); `--pairs N` (default 8) runs
///    N such pairs in alternating order (A B, B A, ...) and compares the pairs' ratios: their
///    median, spread and a distribution-free interval for the median (`PairedRatios`), since on
///    a VM disk one pair moves by as much as the effect; and the pages the writer thread wrote
///    per commit on each side (its own `wchar`: the archive's extra I/O measured, not inferred);
/// 2. the archive's bytes per entry against the log's own encoding;
/// 3. a restore of everything (goal: ≥ 100,000 entries/s of small writes) and one to the middle
///    instant by time.
struct PITRBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pitr", abstract: "Point-in-time archive: write throughput with and without it, archive size, restore replay rate.")

    /// At saturation the archiver closes segments by size (16 MiB: ~220,000 of these entries):
    /// a run of a million writes closes several, each with its state hash, as a saturated leader does.
    static let maxPairs = 20

    /// Short runs, many pairs: a pair's two runs then see nearly the same machine, and the
    /// median of many pairs is steadier than a few long runs (one segment close per run).
    @Option(help: "Writes per run.")
    var writes = 250_000

    @Option(help: "Writes in flight (concurrent submitters).")
    var submitters = 64

    @Option(help: "Value size in bytes.")
    var valueSize = 16

    @Option(help: "Segment size (bytes of entries) at which the archiver closes a segment (default: the archiver's).")
    var segmentBytes = ArchiveOptions(directory: "").segmentMaxBytes

    /// Each segment close hashes the whole state (`stateHashAtApplied`): closing every second
    /// (this bench's former setting) hashed 60 times as often as `emberd --archive` does.
    @Option(help: "Age in seconds at which the archiver closes a segment (default: the archiver's).")
    var segmentAge = ArchiveOptions(directory: "").segmentMaxAgeSeconds

    /// One run moves by up to ±30 % on a VM whose host steals CPU: one pair decides nothing.
    /// Eight pairs put the median between the 2nd and 7th ratio at 93 % confidence (seven: only
    /// between the extremes).
    @Option(help: "Pairs of runs without/with the archive, in alternating order (A B, B A, ...) so a drifting machine favours neither; more than one is compared by the median of the pairs' ratios, with their spread and a 90 % interval for the median.")
    var pairs = 8

    /// The former layout for comparison: two tables that turn at each archive mark, each as
    /// large as a segment (three levels at saturation).
    @Option(help: "Leaves at which the archive's current log table turns (LogRing; 0: only once the older tables are gone, as the former two-table layout did).")
    var logTurnPages = StoreOptions().logTurnLeafPages

    /// Where the writer's time goes: more log pages per commit show up as commit time and bytes
    /// written, more work per entry as apply CPU.
    @Flag(help: "Also print per run: entries per batch, the writer's apply CPU and commit time (wall and CPU) per write, the archiver thread's CPU and the rest of the process's, bytes written (the process's write calls) and context switches per write.")
    var details = false

    func validate() throws {
        guard (1...Self.maxPairs).contains(pairs) else { throw ValidationError("--pairs must be 1...\(Self.maxPairs)") }
        guard writes >= 1, submitters >= 1, valueSize >= 0, segmentBytes >= 1, segmentAge > 0, logTurnPages >= 0 else {
            throw ValidationError("--writes, --submitters, --segment-bytes and --segment-age must be positive, --log-turn-pages not negative")
        }
    }

    func run() async throws {
        let root = NSTemporaryDirectory() + "ember-pitr-bench-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        print("ember-bench pitr: \(writes) writes of \(valueSize)-byte values, \(submitters) in flight"
              + (pairs > 1 ? ", \(pairs) pairs of runs without/with the archive in alternating order" : "")
              + "; the archive's log tables turn " + (logTurnPages == 0 ? "only once the older ones are gone" : "at \(logTurnPages) leaves")
              + "; load average \(loadAverage())")
        var done: [(without: WriteRun, with: WriteRun)] = []
        var archiveDir = ""
        for p in 0..<pairs {
            // A B, B A, A B, ...: a machine that drifts during the runs favours neither side.
            let archiveFirst = p % 2 == 1
            var without: WriteRun? = nil, with: WriteRun? = nil
            for archived in archiveFirst ? [true, false] : [false, true] {
                let dir = root + "/run-\(p)-" + (archived ? "archived" : "plain")
                defer { try? FileManager.default.removeItem(atPath: dir) }
                if archived {
                    // Only the last run's archive is kept (for its size and the restores).
                    if !archiveDir.isEmpty { try? FileManager.default.removeItem(atPath: archiveDir) }
                    archiveDir = root + "/archive-\(p)"
                    with = try await writeRun(directory: dir, archive: archiveDir)
                } else {
                    without = try await writeRun(directory: dir, archive: nil)
                }
                printRun(pair: pairs > 1 ? p : nil, archived ? with! : without!, baseline: archived ? without : nil)
            }
            guard let without, let with else { continue }
            done.append((without, with))
            if pairs > 1 {
                print(String(format: "  pair %d (%@): with/without %.3f (%.1f %% less); CPU per write %+.2f µs (process), %+.2f µs (writer thread)",
                             p + 1, archiveFirst ? "with first" : "without first", with.rate / without.rate,
                             100 * (1 - with.rate / without.rate), with.cpu - without.cpu, with.writerCPU - without.writerCPU))
            }
        }
        if done.count > 1 {
            let ratios = PairedRatios(done.map { $0.with.rate / $0.without.rate })
            let less = 100 * (1 - ratios.median)
            print(String(format: "  medians of %d pairs: with/without %.3f (%.1f %% less; goal ≤ %.0f %%: %@); pairs' ratios, sorted: %@",
                         done.count, ratios.median, less, Self.throughputGoalPercent,
                         ratios.verdict(maxLossPercent: Self.throughputGoalPercent),
                         ratios.sorted.map { String(format: "%.3f", $0) }.joined(separator: ", ")))
            let (lo, hi, coverage) = ratios.medianInterval
            print(String(format: "    spread: min %.3f, quartiles %.3f–%.3f, max %.3f; the median lies in %.3f–%.3f (%.1f–%.1f %% less) with %.0f %% confidence (order statistics)",
                         ratios.sorted.first!, ratios.quantile(0.25), ratios.quantile(0.75), ratios.sorted.last!, lo, hi,
                         100 * (1 - hi), 100 * (1 - lo), 100 * coverage))
            print(String(format: "    the writer thread's writes per commit: %.0f → %.0f bytes (%.2f → %.2f pages; pairs' change %+.2f pages, %+.0f bytes per write); entries per batch %.1f → %.1f",
                         median(done.map(\.without.writerBytesPerCommit)), median(done.map(\.with.writerBytesPerCommit)),
                         median(done.map(\.without.writerPagesPerCommit)), median(done.map(\.with.writerPagesPerCommit)),
                         median(done.map { $0.with.writerPagesPerCommit - $0.without.writerPagesPerCommit }),
                         median(done.map { $0.with.writerBytesPerWrite - $0.without.writerBytesPerWrite }),
                         median(done.map(\.without.entriesPerBatch)), median(done.map(\.with.entriesPerBatch))))
            print(String(format: "    CPU per write: process %.2f → %.2f µs (pairs' change %+.2f µs), writer thread %.2f → %.2f µs (%+.2f µs)",
                         median(done.map(\.without.cpu)), median(done.map(\.with.cpu)), median(done.map { $0.with.cpu - $0.without.cpu }),
                         median(done.map(\.without.writerCPU)), median(done.map(\.with.writerCPU)),
                         median(done.map { $0.with.writerCPU - $0.without.writerCPU })))
            if details {
                print(String(format: "    archiver thread %.2f µs per write; the rest of the process %.2f → %.2f µs; bytes written per write %.0f → %.0f (medians)",
                             median(done.map(\.with.archiverCPU)), median(done.map { $0.without.cpu - $0.without.writerCPU }),
                             median(done.map { $0.with.cpu - $0.with.writerCPU - $0.with.archiverCPU }),
                             median(done.map(\.without.bytesWritten)), median(done.map(\.with.bytesWritten))))
            }
        }
        let archive = try DirectoryArchiveStore(directory: archiveDir, create: false)
        let catalog = ArchiveCatalog(names: try archive.list())
        var segmentBytes = 0, entryBytes = 0, entries = 0
        for s in catalog.segments {
            let bytes = try archive.get(s.name)
            let seg = try ArchiveSegment(decoding: bytes)
            segmentBytes += bytes.count
            entryBytes += seg.entries.reduce(0) { $0 + $1.count }
            entries += seg.count
        }
        print(String(format: "  archive: %d segments, %.1f bytes per entry (the log's encoding: %.1f; uncompressed)",
                     catalog.segments.count, Double(segmentBytes) / Double(max(1, entries)), Double(entryBytes) / Double(max(1, entries))))
        guard let end = catalog.segments.last else { return }
        for (label, target) in [("everything", ArchiveCatalog.Target.index(end.last)),
                                ("the middle instant", .time((end.lastTimestamp + (catalog.segments.first?.firstTimestamp ?? 0)) / 2))] {
            let store = try EmberStore(directory: root + "/restored-\(UUID().uuidString)", options: StoreOptions())
            defer { store.close() }
            let t0 = Date()
            let r = try await ArchiveRestore.restore(from: archive, to: target, into: store, scratchFile: root + "/scratch")
            let seconds = Date().timeIntervalSince(t0)
            print(String(format: "  restore to %@: %d entries in %.2f s = %.0f entries/s (base, checks and replay; index %llu%@)",
                         label, r.entriesReplayed, seconds, Double(r.entriesReplayed) / seconds, r.index, r.hashVerified ? ", hash verified" : ""))
        }
        print("  load average \(loadAverage())")
    }

    /// The goal of issue 37: archiving costs at most this share of the write throughput.
    static let throughputGoalPercent = 5.0

    /// One run's lines: a single pair prints them as the bench always did; with `--pairs` each
    /// run is numbered and carries the load average (and the host's steal) at its end.
    func printRun(pair: Int?, _ r: WriteRun, baseline: WriteRun?) {
        let label = pair.map { "  pair \($0 + 1), " } ?? "  "
        guard r.archived else {
            print(String(format: "%@without the archive: %.0f writes/s; CPU per write: %.2f µs (process), %.2f µs (writer thread)",
                         label, r.rate, r.cpu, r.writerCPU) + (pair == nil ? "" : "; load average \(loadAverage())"))
            printWriterIO(r)
            printDetails(r)
            return
        }
        let less = baseline.map { String(format: " (%.1f %% less)", 100 * (1 - r.rate / $0.rate)) } ?? ""
        print(String(format: "%@with the archive:    %.0f writes/s%@; archive caught up %.2f s after the last write (segments closed at %d bytes or %.0f s)",
                     label, r.rate, less, r.catchUp, segmentBytes, segmentAge))
        let change = baseline.map { String(format: "process, %+.1f %%; ", 100 * (r.cpu / $0.cpu - 1)) } ?? "process; "
        print(String(format: "    CPU per write: %.2f µs (%@%.2f µs with the catch-up), %.2f µs (writer thread)",
                     r.cpu, change, r.cpuWithCatchUp, r.writerCPU) + (pair == nil ? "" : "; load average \(loadAverage())"))
        printWriterIO(r)
        printDetails(r)
    }

    /// What the writer thread wrote per commit (LMDB's dirty pages and meta page), and the log
    /// tables' shapes at the end of the writes (each level of a table's right edge is a page
    /// every commit copies).
    func printWriterIO(_ r: WriteRun) {
        func shape(_ t: LogTableShape) -> String { "\(t.name) \(t.rows) rows, depth \(t.depth), \(t.branchPages)+\(t.leafPages) pages" }
        // The ring's tables in one line: how many, their deepest, and the current one.
        let logs = r.logTables.count <= 3 ? r.logTables.map(shape).joined(separator: ", ")
            : "\(r.logTables.count) tables, \(r.logTables.reduce(0) { $0 + $1.rows }) rows, depth ≤ \(r.logTables.map(\.depth).max() ?? 0); "
                + "the current: " + shape(r.logTables.last!)
        print(String(format: "    writer thread wrote %.0f bytes per commit (%.2f pages of %d; %.0f bytes per write), %.1f entries per commit",
                     r.writerBytesPerCommit, r.writerPagesPerCommit, Self.pageSize, r.writerBytesPerWrite, r.entriesPerBatch)
              + (logs.isEmpty ? "" : "; log tables at the end: " + logs))
    }

    /// LMDB's page: the OS's.
    static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    func printDetails(_ r: WriteRun) {
        guard details else { return }
        print(String(format: "    writer: %.1f entries per batch; per write: apply %.2f µs CPU, commit %.2f µs (%.2f µs CPU, the rest waiting for the disk); "
                     + "%.0f bytes written, %.3f context switches (process)",
                     r.entriesPerBatch, r.applyCPU, r.commitWall, r.commitCPU, r.bytesWritten, r.contextSwitches))
        // The process's CPU split: the writer thread, the archiver's, and the rest (submitters,
        // `prepare`'s validation and encoding, completions), while the writes ran.
        let archiver = r.archived ? String(format: "archiver thread %.2f µs (%.2f µs with the catch-up), ", r.archiverCPU, r.archiverCPUWithCatchUp) : ""
        print(String(format: "    CPU per write: writer thread %.2f µs, %@the rest of the process %.2f µs", r.writerCPU, archiver,
                     r.cpu - r.writerCPU - r.archiverCPU))
    }

    struct WriteRun {
        var archived: Bool
        var rate: Double
        var catchUp: Double
        var cpu: Double
        var cpuWithCatchUp: Double
        var writerCPU: Double
        /// `--details`: the writer's split and what the process wrote and switched, per write.
        var entriesPerBatch = 0.0
        var applyCPU = 0.0
        var commitWall = 0.0
        var commitCPU = 0.0
        var bytesWritten = 0.0
        var contextSwitches = 0.0
        /// The archiver thread's CPU per write while the writes ran, and until it caught up.
        var archiverCPU = 0.0
        var archiverCPUWithCatchUp = 0.0
        /// The writer thread's bytes handed to write calls, per commit (every LMDB commit of
        /// the run: batches, marks, empty turns) and per write; 0 where unmeasured.
        var writerBytesPerCommit = 0.0
        var writerBytesPerWrite = 0.0
        var writerPagesPerCommit: Double { writerBytesPerCommit / Double(PITRBench.pageSize) }
        /// The log tables holding rows when the writes ended.
        var logTables: [LogTableShape] = []
    }

    /// Bytes this process handed to write calls so far (/proc/self/io `wchar`: LMDB's page
    /// write-out, the archive's segments).
    static func bytesWritten() -> Double {
        guard let s = try? String(contentsOfFile: "/proc/self/io", encoding: .utf8) else { return 0 }
        for line in s.split(separator: "\n") where line.hasPrefix("wchar:") {
            return Double(line.dropFirst(6).trimmingCharacters(in: .whitespaces)) ?? 0
        }
        return 0
    }

    /// Voluntary and involuntary context switches of this process so far.
    static func contextSwitches() -> Double {
        var u = rusage()
        getrusage(RUSAGE_SELF.rawValue, &u)
        return Double(u.ru_nvcsw + u.ru_nivcsw)
    }

    /// N writes into a fresh store; with `archive`, the archiver writes to it and the run waits
    /// until it holds every write. Returns writes/s, the archive's catch-up time, and CPU µs
    /// per write: the process's while writing and until the archive caught up, and the store's
    /// writer thread's (applying and committing).
    func writeRun(directory: String, archive: String?) async throws -> WriteRun {
        var options = StoreOptions()
        options.logRetention = StoreOptions.singleNodeLogRetention
        if archive != nil {
            // As `emberd --archive` on a single node (`StoreFactory.open`).
            options.archiveHold = StoreOptions.defaultArchiveHold
            options.alternatingLog = true
            options.logTurnLeafPages = logTurnPages == 0 ? .max : logTurnPages
        }
        let local = try LMDBDataStore(directory: directory, options: options, logger: Logger(label: "ember-bench"))
        defer { local.close() }
        let store = local.storage
        var archiver: Archiver? = nil
        if let archive {
            var a = ArchiveOptions(directory: archive)
            a.segmentMaxBytes = segmentBytes
            a.segmentMaxAgeSeconds = segmentAge
            archiver = try local.startArchive(a, isLeader: { true }, mark: { i in
                _ = try await store.submit(namespace: Archiver.markNamespace, .archived(through: i))
            })
        }
        let value = JSON.string(String(repeating: "v", count: valueSize))
        let (writes, submitters) = (self.writes, self.submitters)
        let t0 = Date()
        let cpu0 = ownCPUSeconds()
        let (io0, cs0) = (Self.bytesWritten(), Self.contextSwitches())
        let w0 = store.writerThreadIO()
        let m0 = store.metrics
        try await withThrowingTaskGroup(of: Void.self) { group in
            for w in 0..<submitters {
                group.addTask {
                    var i = w
                    while i < writes {
                        _ = try await store.submit(namespace: "bench", .set(path: Path(validated: ["bench", "w\(w)", "k\(i)"]), value: value))
                        i += submitters
                    }
                }
            }
            try await group.waitForAll()
        }
        let seconds = Date().timeIntervalSince(t0)
        let cpu = ownCPUSeconds() - cpu0
        let m1 = store.metrics
        let w1 = store.writerThreadIO()
        let (io1, cs1) = (Self.bytesWritten(), Self.contextSwitches())
        let logTables = try store.logTableShapes()
        let writerBytes = w0.flatMap { a in w1.map { Double($0.bytesHandedToWrites - a.bytesHandedToWrites) } } ?? 0
        let writerNanos = (m1.transactionCPUNanos + m1.commitCPUNanos) - (m0.transactionCPUNanos + m0.commitCPUNanos)
        var catchUp = 0.0
        let archiverCPU = archiver?.archiveStatus().cpuSeconds ?? 0
        if let archiver {
            // Caught up: the open segment stored (an orderly stop stores it at once, hash and
            // all, instead of waiting for its age).
            let t1 = Date()
            await archiver.stop()
            catchUp = Date().timeIntervalSince(t1)
            let archived = ArchiveCatalog(names: try DirectoryArchiveStore(directory: archive!, create: false).list()).segments.last?.last ?? 0
            guard archived >= UInt64(writes) else { throw ValidationError("the archive holds entries through \(archived) only, after \(writes) writes") }
        }
        let n = Double(writes)
        let commits = Double(max(1, m1.commits - m0.commits))
        return WriteRun(archived: archive != nil, rate: n / seconds, catchUp: catchUp, cpu: cpu / n * 1e6,
                        cpuWithCatchUp: (ownCPUSeconds() - cpu0) / n * 1e6, writerCPU: Double(writerNanos) / n / 1e3,
                        entriesPerBatch: Double(m1.entriesCommitted - m0.entriesCommitted) / Double(max(1, m1.batches - m0.batches)),
                        applyCPU: Double(m1.transactionCPUNanos - m0.transactionCPUNanos) / n / 1e3,
                        commitWall: Double(m1.commitNanos - m0.commitNanos) / n / 1e3,
                        commitCPU: Double(m1.commitCPUNanos - m0.commitCPUNanos) / n / 1e3,
                        bytesWritten: (io1 - io0) / n, contextSwitches: (cs1 - cs0) / n,
                        archiverCPU: archiverCPU / n * 1e6, archiverCPUWithCatchUp: (archiver?.archiveStatus().cpuSeconds ?? 0) / n * 1e6,
                        writerBytesPerCommit: writerBytes / commits, writerBytesPerWrite: writerBytes / n, logTables: logTables)
    }
}
