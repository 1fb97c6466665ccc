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
