import ArgumentParser
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
struct RestoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "restore", abstract: "Seed a stopped node's data directory from a backup file.")
    @OptionGroup var output: OutputOptions
    @Option(name: .customLong("in"), help: "Backup file.") var input: String
    @Option(help: "Data directory of the node (created if missing; the node must not be running).") var data: String
    @Flag(help: "Replace data already in DIR.") var force = false

    func run() async throws {
        try await runCLI {
            // Verify first: nothing is created or replaced for a bad file.
            _ = try BackupFormat.verify(path: input)
            try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
            let store: EmberStore
            do { store = try EmberStore(directory: data, options: StoreOptions()) } catch {
                throw CLIError("cannot open \(data): \(error) (is the node still running?)")
            }
            defer { store.close() }
            if !force && (store.appliedIndex > 0 || store.lastLogIndex > 0) {
                throw CLIError("\(data) already holds data (applied index \(store.appliedIndex)); use --force to replace it")
            }
            let summary = try await store.restoreBackup(from: input)
            let hash = try store.stateHash()
            if output.json {
                emit(#"{"data":"\#(data)","appliedIndex":\#(summary.appliedIndex),"stateHash":"\#(hash)"}"#)
            } else {
                emit("restored \(input) into \(data): index \(summary.appliedIndex), state hash \(hash)")
            }
        }
    }
}
