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
///    run on the same machine (goal: ≤ 5 % less with the archive);
/// 2. the archive's bytes per entry against the log's own encoding;
/// 3. a restore of everything (goal: ≥ 100,000 entries/s of small writes) and one to the middle
///    instant by time.
struct PITRBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pitr", abstract: "Point-in-time archive: write throughput with and without it, archive size, restore replay rate.")

    /// At saturation the archiver closes segments by size (16 MiB: ~220,000 of these entries):
    /// a run of a million writes closes several, each with its state hash, as a saturated leader does.
    @Option(help: "Writes per run.")
    var writes = 1_000_000

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

    func validate() throws {
        guard writes >= 1, submitters >= 1, valueSize >= 0, segmentBytes >= 1, segmentAge > 0 else {
            throw ValidationError("--writes, --submitters, --segment-bytes and --segment-age must be positive")
        }
    }

    func run() async throws {
        let root = NSTemporaryDirectory() + "ember-pitr-bench-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        print("ember-bench pitr: \(writes) writes of \(valueSize)-byte values, \(submitters) in flight; load average \(loadAverage())")
        let without = try await writeRun(directory: root + "/plain", archive: nil)
        print(String(format: "  without the archive: %.0f writes/s; CPU per write: %.2f µs (process), %.2f µs (writer thread)",
                     without.rate, without.cpu, without.writerCPU))
        let archiveDir = root + "/archive"
        let with = try await writeRun(directory: root + "/archived", archive: archiveDir)
        print(String(format: "  with the archive:    %.0f writes/s (%.1f %% less); archive caught up %.2f s after the last write (segments closed at %d bytes or %.0f s)",
                     with.rate, 100 * (1 - with.rate / without.rate), with.catchUp, segmentBytes, segmentAge))
        print(String(format: "    CPU per write: %.2f µs (process, %+.1f %%; %.2f µs with the catch-up), %.2f µs (writer thread)",
                     with.cpu, 100 * (with.cpu / without.cpu - 1), with.cpuWithCatchUp, with.writerCPU))
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

    /// N writes into a fresh store; with `archive`, the archiver writes to it and the run waits
    /// until it holds every write. Returns writes/s, the archive's catch-up time, and CPU µs
    /// per write: the process's while writing and until the archive caught up, and the store's
    /// writer thread's (applying and committing).
    func writeRun(directory: String, archive: String?) async throws
        -> (rate: Double, catchUp: Double, cpu: Double, cpuWithCatchUp: Double, writerCPU: Double) {
        var options = StoreOptions()
        options.logRetention = StoreOptions.singleNodeLogRetention
        if archive != nil {
            // As `emberd --archive` on a single node (`StoreFactory.open`).
            options.archiveHold = StoreOptions.defaultArchiveHold
            options.alternatingLog = true
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
        let writerNanos = (m1.transactionCPUNanos + m1.commitCPUNanos) - (m0.transactionCPUNanos + m0.commitCPUNanos)
        var catchUp = 0.0
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
        return (n / seconds, catchUp, cpu / n * 1e6, (ownCPUSeconds() - cpu0) / n * 1e6, Double(writerNanos) / n / 1e3)
    }
}
