import ArgumentParser
import AsyncHTTPClient
import EmberCore
import Foundation
import NIOCore
import NIOHTTP1

/// `ember export FILE [PATH]`: the tree at PATH (with priorities, format=export) streamed to FILE.
struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "export", abstract: "Save the tree at PATH to FILE (JSON, with priorities).")
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "Output file.") var file: String
    @Argument(help: "Database path (default /).") var path: String = "/"
    @Flag(help: "No progress line.") var quiet = false

    func run() async throws {
        try await runCLI {
            try await NodeClient.with(connection, streaming: true) { c in
                let request = c.makeRequest(.GET, c.dataURL(path, query: ["format=export"]))
                let response = try await c.send(request)
                guard response.status.code == 200 else {
                    let body = Array(buffer: try await response.body.collect(upTo: 1 << 20))
                    throw NodeClient.failure(.GET, request.url, Int(response.status.code), body)
                }
                let total = response.headers.first(name: "Content-Length").flatMap { Int64($0) }
                let bytes = try await streamToFile(response.body, path: file,
                                                   progress: TransferProgress("export", total: total, enabled: !quiet))
                note("exported \(TransferProgress.size(bytes)) to \(file)")
            }
        }
    }
}

/// Streams a response body into `path` (via `path.partial`, renamed when complete).
func streamToFile(_ body: HTTPClientResponse.Body, path: String, progress: TransferProgress) async throws -> Int64 {
    let tmp = path + ".partial"
    guard FileManager.default.createFile(atPath: tmp, contents: nil), let handle = FileHandle(forWritingAtPath: tmp) else {
        throw CLIError("cannot create \(tmp)")
    }
    do {
        for try await buffer in body {
            try handle.write(contentsOf: Data(buffer.readableBytesView))
            progress.advance(buffer.readableBytes)
        }
        try handle.synchronize()
        try handle.close()
    } catch {
        try? handle.close()
        try? FileManager.default.removeItem(atPath: tmp)
        progress.finish()
        throw CLIError("transfer failed: \(NodeClient.describe(error))")
    }
    progress.finish()
    _ = try? FileManager.default.removeItem(atPath: path)
    try FileManager.default.moveItem(atPath: tmp, toPath: path)
    return progress.done
}

/// `ember import FILE [PATH]`: replaces the tree at PATH with FILE's JSON. A file larger than
/// --max-request-bytes whose top level is an object goes in several requests: the first replaces
/// PATH with a group of children, the rest add groups by multi-path update (not atomic as a
/// whole; each request is).
struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "import", abstract: "Replace the tree at PATH with FILE's JSON.")
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "JSON file.") var file: String
    @Argument(help: "Database path (default /).") var path: String = "/"
    @Option(help: "Largest request sent (keep below the node's --max-body-bytes).") var maxRequestBytes = 16 << 20
    @Option(help: "Most top-level children per request after the first (the node's update limit is 10000).") var maxChildren = 10_000
    @Flag(help: "No progress line.") var quiet = false

    func validate() throws {
        guard maxRequestBytes >= 1024, maxChildren > 0 else {
            throw ValidationError("--max-request-bytes must be at least 1024 and --max-children positive")
        }
    }

    func run() async throws {
        try await runCLI {
            guard let data = FileManager.default.contents(atPath: file) else { throw CLIError("cannot read \(file)") }
            let bytes = Array(data)
            let value: JSON
            do { value = try JSON.parse(bytes) } catch { throw CLIError("\(file) is not valid JSON: \(error)") }
            let batches = try Self.batches(bytes: bytes, value: value, limit: maxRequestBytes, maxChildren: maxChildren)
            let progress = TransferProgress("import", total: Int64(batches.reduce(0) { $0 + $1.count }), enabled: !quiet)
            try await NodeClient.with(connection) { c in
                for (i, batch) in batches.enumerated() {
                    let method: NIOHTTP1.HTTPMethod = i == 0 ? .PUT : .PATCH
                    try await c.call(method, c.dataURL(path, query: ["print=silent"]), body: batch)
                    progress.advance(batch.count)
                }
            }
            progress.finish()
            note("imported \(TransferProgress.size(Int64(bytes.count))) into \(path) in \(batches.count) request(s)")
        }
    }

    /// The request bodies: the file itself when small enough, else groups of top-level children.
    static func batches(bytes: [UInt8], value: JSON, limit: Int, maxChildren: Int) throws -> [[UInt8]] {
        if bytes.count <= limit { return [bytes] }
        guard case .object(let children) = value else {
            throw CLIError("the file is \(bytes.count) bytes, over --max-request-bytes \(limit), and not an object to split")
        }
        var out: [[UInt8]] = []
        var group: [String: JSON] = [:]
        var size = 2
        for key in children.keys.sorted() {
            let child = children[key]!
            let childSize = child.serializedBytes(pretty: false).count + key.utf8.count + 4
            guard childSize + 2 <= limit else {
                throw CLIError("child \(key) alone is \(childSize) bytes, over --max-request-bytes \(limit); import it separately")
            }
            if size + childSize > limit || group.count >= maxChildren {
                out.append(JSON.object(group).serializedBytes(pretty: false))
                group = [:]
                size = 2
            }
            group[key] = child
            size += childSize
        }
        if !group.isEmpty || out.isEmpty { out.append(JSON.object(group).serializedBytes(pretty: false)) }
        return out
    }
}
