import ArgumentParser
import EmberCore
import EmberStorage
import Foundation

/// `ember stats`: what a node's data directory holds, per table (its `/.ember/status` `storage`).
struct StatsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "stats", abstract: "Show a node's storage: bytes and entries per table, free pages, file size.")
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await runCLI {
            try await NodeClient.with(connection) { c in
                let r = try await c.call(.GET, c.options.node + "/.ember/status")
                guard case .object(let status) = try r.json(), case .object(let storage)? = status["storage"] else {
                    throw CLIError("\(c.options.node) reports no storage figures")
                }
                if output.json {
                    emit(String(decoding: JSON.object(storage).serializedBytes(pretty: false), as: UTF8.self))
                    return
                }
                func int(_ j: JSON?) -> Int64 { if case .int(let n)? = j { return n }; if case .double(let d)? = j { return Int64(d) }; return 0 }
                var rows: [[String]] = []
                if case .object(let tables)? = storage["tables"] {
                    for name in ["tree", "versions", "index", "indexReverse", "log", "meta"] {
                        guard case .object(let t)? = tables[name] else { continue }
                        rows.append([name, "\(int(t["entries"]))", "\(int(t["pages"]))", TransferProgress.size(int(t["bytes"]))])
                    }
                }
                rows.append(["free pages", "-", "\(int(storage["freePages"]))", TransferProgress.size(int(storage["freeBytes"]))])
                rows.append(["file", "-", "-", TransferProgress.size(int(storage["fileBytes"]))])
                emit(renderTable(header: ["TABLE", "ENTRIES", "PAGES", "BYTES"], rows: rows))
            }
        }
    }
}

/// `ember compact --data DIR [--out DIR2]`: rewrites a stopped node's data directory without
/// free pages (LMDB's compacting copy), giving the disk of deleted data back.
struct CompactCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "compact", abstract: "Rewrite a stopped node's data directory compactly (gives deleted data's disk back).")
    @OptionGroup var output: OutputOptions
    @Option(help: "Data directory of the node (the node must be stopped).") var data: String
    @Option(help: "Write the compacted copy into this new directory instead of replacing DIR's data file.") var out: String?

    func run() async throws {
        try await runCLI {
            let result: (before: Int, after: Int)
            do { result = try EmberStore.compact(directory: data, output: out) } catch let e as DataDirectoryInUse {
                throw CLIError(e.description)
            } catch {
                throw CLIError("cannot compact \(data): \(error)")
            }
            if output.json {
                emit(#"{"data":"\#(out ?? data)","bytesBefore":\#(result.before),"bytesAfter":\#(result.after)}"#)
            } else {
                emit("compacted \(data)\(out.map { " into \($0)" } ?? ""): \(TransferProgress.size(Int64(result.before))) → \(TransferProgress.size(Int64(result.after)))")
            }
        }
    }
}
