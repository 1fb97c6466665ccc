import ArgumentParser
import EmberCore
import EmberStorage
import Foundation

/// `ember-bench pitr-window`: how long `ember restore --archive DIR --to T` takes to reach the
/// last second of a long window (issue 37's goal: a 1-hour window of 1,000 writes/s, the target
/// reached in under 10 s after the base is copied). Builds the archive directly in the archive
/// writer's format (`ArchiveSegment`, `ArchiveName`, a base from `writeBackup`) instead of
/// writing for an hour: `--seconds × --rate` small set entries with timestamps spread evenly
/// over the window, one segment per `--segment-age` seconds (the archiver's default age), after
/// a base of the empty state (its copy costs nothing, so the whole restore is the replay). Then
/// runs the `ember` binary and times it. Segments record no state hash (it would take a state to
/// compute), so the restore verifies none; it still hashes the restored state, as every restore
/// does.
struct PITRWindowBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pitr-window", abstract: "Point-in-time restore to the last second of a long archived window, timed through `ember restore`.")

    @Option(help: "Window length in seconds.")
    var seconds = 3_600

    @Option(help: "Writes per second over the window.")
    var rate = 1_000

    @Option(help: "Seconds of entries per segment.")
    var segmentAge = 60

    @Option(help: "Value size in bytes.")
    var valueSize = 16

    @Option(help: "Archive directory to build (and keep); an existing archive there is reused as it is. Default: a temporary one, removed after the run.")
    var archive: String?

    @Option(help: "The ember binary. Default: the one next to ember-bench.")
    var ember: String?

    /// Largest window built (entries): the builder holds one segment at a time, the restore
    /// replays them all.
    static let maxEntries = 100_000_000

    func validate() throws {
        guard seconds >= 2, rate >= 1, segmentAge >= 1, valueSize >= 0 else {
            throw ValidationError("--seconds must be at least 2; --rate and --segment-age positive")
        }
        guard seconds * rate <= Self.maxEntries else { throw ValidationError("at most \(Self.maxEntries) entries (--seconds × --rate)") }
    }

    func run() async throws {
        let root = NSTemporaryDirectory() + "ember-pitr-window-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let dir = archive ?? root + "/archive"
        let ember = self.ember ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("ember").path
        guard FileManager.default.isExecutableFile(atPath: ember) else {
            throw ValidationError("no ember binary at \(ember) (build it: swift build -c release --product ember, or pass --ember)")
        }
        print("ember-bench pitr-window: \(seconds) s × \(rate) writes/s, \(segmentAge)-s segments; load average \(loadAverage())")
        let store = try DirectoryArchiveStore(directory: dir)
        var catalog = ArchiveCatalog(names: try store.list())
        if catalog.segments.isEmpty {
            let t0 = Date()
            try build(store, scratch: root)
            catalog = ArchiveCatalog(names: try store.list())
            print(String(format: "  built %@: %d segments, %d entries in %.1f s", dir, catalog.segments.count,
                         Int(catalog.segments.last?.last ?? 0), Date().timeIntervalSince(t0)))
        } else {
            print("  reusing \(dir): \(catalog.segments.count) segments through index \(catalog.segments.last!.last)")
        }
        guard let first = catalog.segments.first, let last = catalog.segments.last else { throw ValidationError("no segments in \(dir)") }
        // Inside the window's last second, between two entries' times: the replay stops inside
        // the last segment, as a restore to "one second before the mistake" does.
        let target = ArchiveTime.format(last.lastTimestamp - 500)
        let data = root + "/restored"
        let args = ["restore", "--archive", dir, "--to", target, "--data", data, "--json"]
        print("  \(ember) \(args.joined(separator: " "))")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: ember)
        p.arguments = args
        let out = Pipe()
        p.standardOutput = out
        let t0 = ContinuousClock.now
        try p.run()
        let bytes = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let elapsed = (ContinuousClock.now - t0).seconds
        guard p.terminationStatus == 0 else { throw ValidationError("ember restore failed (exit \(p.terminationStatus))") }
        let summary = try JSON.parse(String(decoding: bytes, as: UTF8.self))
        let replayed = Int(summary["entriesReplayed"]?.numberValue ?? 0)
        let index = UInt64(summary["index"]?.numberValue ?? 0)
        guard index < last.last, index + UInt64(rate) >= last.last else {
            throw ValidationError("the restore reached index \(index), not the window's last second (it ends at \(last.last))")
        }
        print(String(format: "  restore to %@ (window %@ to %@): %d entries replayed to index %llu in %.2f s = %.0f entries/s (goal: < 10 s for 1 h at 1,000/s)",
                     target, ArchiveTime.format(first.firstTimestamp), ArchiveTime.format(last.lastTimestamp), replayed, index, elapsed,
                     Double(replayed) / elapsed))
        print("  load average \(loadAverage())")
    }

    /// The base (the empty state) and the segments, written as the archiver writes them.
    func build(_ store: DirectoryArchiveStore, scratch: String) throws {
        let empty = try EmberStore(directory: scratch + "/empty", options: StoreOptions())
        let baseFile = scratch + "/base.embk"
        let summary = try empty.writeBackup(to: baseFile)
        empty.close()
        let end = Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
        let start = end - Int64(seconds) * 1000
        try store.putFile(ArchiveName.base(index: summary.appliedIndex, timestamp: start - 1), from: baseFile)
        let value = JSON.string(String(repeating: "v", count: valueSize))
        let total = seconds * rate, perSegment = segmentAge * rate
        var next = 1
        while next <= total {
            let upTo = min(total, next + perSegment - 1)
            var entries: [(index: UInt64, bytes: [UInt8])] = []
            entries.reserveCapacity(upTo - next + 1)
            for i in next...upTo {
                let path = try Path(validated: ["bench", "w\(i % 64)", "k\(i)"])
                let e = LogEntry(index: UInt64(i), term: 1, namespace: "bench", operation: .set(path: path, value: value),
                                 timestamp: start + Int64(i - 1) * 1000 / Int64(rate))
                entries.append((UInt64(i), e.encoded()))
            }
            let segment = try ArchiveSegment(entries: entries, stateHash: "")
            try store.put(segment.name, bytes: segment.encoded())
            next = upTo + 1
        }
    }
}
