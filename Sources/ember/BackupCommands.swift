import ArgumentParser
import EmberArchiveS3
import EmberStorage
import Foundation

/// `ember backup --node URL --out FILE`: streams `GET /.ember/backup` (admin) into FILE with a
/// progress bar, then verifies the file's checksum before keeping it.
struct BackupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "backup", abstract: "Save a consistent snapshot of a node's whole state to FILE.")
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions
    @Option(help: "Backup file to write.") var out: String
    @Flag(help: "No progress bar.") var quiet = false

    func run() async throws {
        try await runCLI {
            try await NodeClient.with(connection, streaming: true) { c in
                let request = c.makeRequest(.GET, c.options.node + "/.ember/backup")
                let response = try await c.send(request)
                guard response.status.code == 200 else {
                    let body = Array(buffer: try await response.body.collect(upTo: 1 << 20))
                    throw NodeClient.failure(.GET, request.url, Int(response.status.code), body)
                }
                let total = response.headers.first(name: "Content-Length").flatMap { Int64($0) }
                let bytes = try await streamToFile(response.body, path: out,
                                                   progress: TransferProgress("backup", total: total, enabled: !quiet && !output.json))
                let summary: BackupFormat.Summary
                do { summary = try BackupFormat.verify(path: out) } catch {
                    try? FileManager.default.removeItem(atPath: out)
                    throw CLIError("the backup received is not valid (\(error)); nothing kept")
                }
                if output.json {
                    emit(#"{"file":"\#(out)","bytes":\#(bytes),"appliedIndex":\#(summary.appliedIndex)}"#)
                } else {
                    emit("backup of \(c.options.node) at index \(summary.appliedIndex): \(TransferProgress.size(bytes)) in \(out)")
                }
            }
        }
    }
}

/// `ember restore --in FILE --data DIR`: seeds a stopped node's data directory from a backup
/// (offline). For a cluster, restore the same file into every node's directory before starting
/// them: each starts from the backup as its Raft snapshot.
///
/// `ember restore --archive DIR --to TIME | --to-index N --data NEWDIR`: point-in-time restore
/// from the archive `emberd --archive` writes (ArchiveRestore): the newest base at or before the
/// target, then the archived entries up to the last one at or before it.
struct RestoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "restore", abstract: "Seed a stopped node's data directory from a backup file, or from the point-in-time archive at any instant of its window.")
    @OptionGroup var output: OutputOptions
    @Option(name: .customLong("in"), help: "Backup file.") var input: String?
    @Option(help: "Point-in-time archive: directory or s3://bucket/prefix (emberd --archive; see --archive-s3-*); with --to or --to-index.") var archive: String?
    @OptionGroup var archiveS3: ArchiveS3Flags
    @Option(help: "Archive: restore the state as of this instant (RFC 3339, e.g. 2026-11-28T12:34:56.789Z): after the last entry at or before it.") var to: String?
    @Option(help: "Archive: restore the state after this log index.") var toIndex: UInt64?
    @Option(help: "Data directory of the node (created if missing; the node must not be running).") var data: String
    @Flag(help: "Replace data already in DIR.") var force = false

    func validate() throws {
        switch (input, archive) {
        case (nil, nil): throw ValidationError("give --in FILE (a backup) or --archive DIR with --to or --to-index")
        case (_?, _?): throw ValidationError("--in and --archive exclude each other")
        case (_?, nil):
            if to != nil || toIndex != nil { throw ValidationError("--to and --to-index go with --archive") }
        case (nil, _?):
            guard (to == nil) != (toIndex == nil) else { throw ValidationError("--archive needs one of --to TIME or --to-index N") }
            if let to, ArchiveTime.parse(to) == nil {
                throw ValidationError("--to must be an RFC 3339 time such as 2026-11-28T12:34:56.789Z")
            }
        }
    }

    func run() async throws {
        try await runCLI {
            if let archive { return try await restoreArchive(archive) }
            guard let input else { return }
            // Verify first: nothing is created or replaced for a bad file.
            _ = try BackupFormat.verify(path: input)
            let store = try openTarget()
            defer { store.close() }
            let summary = try await store.restoreBackup(from: input)
            let hash = try store.stateHash()
            if output.json {
                emit(#"{"data":"\#(data)","appliedIndex":\#(summary.appliedIndex),"stateHash":"\#(hash)"}"#)
            } else {
                emit("restored \(input) into \(data): index \(summary.appliedIndex), state hash \(hash)")
            }
        }
    }

    /// Where `restore --archive` replays before moving the result into DIR.
    static let stagingName = ".restore-partial"

    /// DIR may receive a restore: created if missing; data already there needs --force. Creates
    /// no data file.
    func checkTarget() throws {
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        guard FileManager.default.fileExists(atPath: data + "/data.mdb") else { return }
        try openTarget().close()
    }

    func openTarget() throws -> EmberStore {
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        let store: EmberStore
        do { store = try EmberStore(directory: data, options: StoreOptions()) } catch {
            throw CLIError("cannot open \(data): \(error) (is the node still running?)")
        }
        if !force && (store.appliedIndex > 0 || store.lastLogIndex > 0) {
            store.close()
            throw CLIError("\(data) already holds data (applied index \(store.appliedIndex)); use --force to replace it")
        }
        return store
    }

    func restoreArchive(_ dir: String) async throws {
        let target: ArchiveCatalog.Target = toIndex.map { ArchiveCatalog.Target.index($0) } ?? .time(ArchiveTime.parse(to ?? "") ?? 0)
        let source = try archiveS3.open(dir, create: false)
        // The plan first: a target outside the window or cut off by a gap creates nothing.
        _ = try ArchiveCatalog(names: try source.list()).plan(target)
        try checkTarget()
        // The replay runs in a staging directory and its data file is moved into place only
        // once the target is reached: a corrupt segment met on the way leaves DIR as it was,
        // never a state older than asked for where a node could start from it.
        let staging = data + "/" + Self.stagingName
        try? FileManager.default.removeItem(atPath: staging)
        try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
        let summary: ArchiveRestore.Summary
        do {
            // Not synced commit by commit: the staging file is used only once the replay is
            // whole, and it is synced once then, before it is moved into place.
            var options = StoreOptions()
            options.durable = false
            let store = try EmberStore(directory: staging, options: options)
            defer { store.close() }
            summary = try await ArchiveRestore.restore(from: source, to: target, into: store,
                                                       scratchFile: staging + "/.restore-base.embk")
            try store.syncToDisk()
        } catch {
            try? FileManager.default.removeItem(atPath: staging)
            throw CLIError("restore from \(dir) failed, \(data) left as it was: \(error)")
        }
        guard rename(staging + "/data.mdb", data + "/data.mdb") == 0 else {
            let e = errno
            try? FileManager.default.removeItem(atPath: staging)
            throw CLIError("cannot move the restored data file into \(data): errno \(e)")
        }
        let fd = open(data, O_RDONLY)
        if fd >= 0 { _ = fsync(fd); close(fd) }
        try? FileManager.default.removeItem(atPath: staging)
        let time = ArchiveTime.format(summary.timestamp)
        if output.json {
            emit(#"{"data":"\#(data)","base":"\#(summary.base)","baseIndex":\#(summary.baseIndex),"entriesReplayed":\#(summary.entriesReplayed),"index":\#(summary.index),"time":"\#(time)","stateHash":"\#(summary.stateHash)","hashVerified":\#(summary.hashVerified)}"#)
        } else {
            emit("restored \(data) from base \(summary.base), \(summary.entriesReplayed) entries replayed: index \(summary.index), time \(time), state hash \(summary.stateHash)\(summary.hashVerified ? " (matches the archive)" : "")")
        }
    }
}
