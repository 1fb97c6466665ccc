import ArgumentParser
import EmberArchiveS3
import EmberCore
import EmberStorage
import Foundation

/// `ember archive ls|verify DIR`: the point-in-time archive `emberd --archive DIR` writes.
struct ArchiveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "archive", abstract: "Inspect the point-in-time archive (emberd --archive).",
        subcommands: [ArchiveListCommand.self, ArchiveVerifyCommand.self])
}

/// The recoverable window(s), the objects and any gap, from the listing alone.
struct ArchiveListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ls", abstract: "Show the archive's recoverable window, its segments and bases, and any gap.")
    @OptionGroup var output: OutputOptions
    @Argument(help: "Archive: directory or s3://bucket/prefix (see --archive-s3-*).") var directory: String
    @OptionGroup var archiveS3: ArchiveS3Flags

    func run() async throws {
        try await runCLI {
            let store = try archiveS3.open(directory, create: false)
            let c = ArchiveCatalog(names: try store.list())
            let windows = c.windows
            let start = windows.first, end = windows.max { $0.endIndex < $1.endIndex }
            if output.json {
                func obj(_ o: ArchiveCatalog.Object) -> JSON {
                    .object(["name": .string(o.name), "first": .int(Int64(o.first)), "last": .int(Int64(o.last)),
                             "firstTime": .string(ArchiveTime.format(o.firstTimestamp)), "lastTime": .string(ArchiveTime.format(o.lastTimestamp))])
                }
                var segments: [JSON] = []
                for s in c.segments {
                    // The recorded hash is in the segment's header: read it (ls is for people and tests, not hot).
                    var o = obj(s)
                    if case .object(var m) = o, let seg = try? ArchiveSegment(decoding: try store.get(s.name)) {
                        m["stateHash"] = .string(seg.stateHash)
                        o = .object(m)
                    }
                    segments.append(o)
                }
                let out: JSON = .object([
                    "windowStart": start.map { JSON.string(ArchiveTime.format($0.base.lastTimestamp)) } ?? JSON.null,
                    "windowStartIndex": start.map { JSON.int(Int64($0.base.first)) } ?? JSON.null,
                    "windowEnd": end.map { JSON.string(ArchiveTime.format($0.endTimestamp)) } ?? JSON.null,
                    "windowEndIndex": end.map { JSON.int(Int64($0.endIndex)) } ?? JSON.null,
                    "segments": .array(segments),
                    "bases": .array(c.bases.map(obj)),
                    "gaps": .array(c.gaps.map { g in JSON.object(["from": .int(Int64(g.from)), "to": .int(Int64(g.to))]) }),
                ])
                emit(out.serialized())
                return
            }
            if let start, let end {
                emit("recoverable: \(ArchiveTime.format(start.base.lastTimestamp)) (index \(start.base.first)) to \(ArchiveTime.format(end.endTimestamp)) (index \(end.endIndex))")
            } else {
                emit("recoverable: nothing (no base snapshot)")
            }
            emit("\(c.bases.count) bases, \(c.segments.count) segments")
            for b in c.bases { emit("  base     index \(b.first)  \(ArchiveTime.format(b.lastTimestamp))  \(b.name)") }
            for s in c.segments {
                emit("  segment  \(s.first)...\(s.last)  \(ArchiveTime.format(s.firstTimestamp)) to \(ArchiveTime.format(s.lastTimestamp))")
            }
            for g in c.gaps { emit("GAP: entries \(g.from)...\(g.to) are in no segment: no restore crosses it") }
        }
    }
}

/// Reads every object: checksums, framing, index continuity. Exits 1 on any problem.
struct ArchiveVerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "verify", abstract: "Check every checksum of the archive and its index continuity.")
    @OptionGroup var output: OutputOptions
    @Argument(help: "Archive: directory or s3://bucket/prefix (see --archive-s3-*).") var directory: String
    @OptionGroup var archiveS3: ArchiveS3Flags

    func run() async throws {
        try await runCLI {
            let store = try archiveS3.open(directory, create: false)
            let (checked, problems) = try ArchiveRestore.verify(store)
            if output.json {
                emit(JSON.object(["checked": .int(Int64(checked)), "ok": .bool(problems.isEmpty),
                                  "problems": .array(problems.map { .string($0) })]).serialized())
            } else {
                for p in problems { emit("BAD: \(p)") }
                emit(problems.isEmpty ? "archive \(directory): \(checked) objects verified, no gap" : "archive \(directory): \(problems.count) problems in \(checked) objects")
            }
            if !problems.isEmpty { throw CLIError("the archive at \(directory) failed verification (\(problems.count) problems)") }
        }
    }
}
