import ArgumentParser
import EmberCore
import Foundation
import NIOCore

/// `ember watch PATH`: the node's SSE stream, one line per event as it arrives.
struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch", abstract: "Print changes at PATH as they happen (server-sent events).")
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions
    @Argument(help: "Database path.") var path: String
    @Option(help: "Exit after this many data events (the first is the current value).") var count: Int?

    /// A single SSE line longer than this ends the watch (a node sends one JSON value per line).
    static let maxLineBytes = 64 << 20

    func run() async throws {
        try await runCLI {
            try await NodeClient.with(connection, streaming: true) { c in
                let response = try await c.openEventStream(c.dataURL(path))
                var parser = SSEParser()
                var seen = 0
                for try await buffer in response.body {
                    for event in try parser.feed(Array(buffer: buffer)) {
                        switch event.name {
                        case "keep-alive": continue
                        case "cancel": throw CLIError("the node cancelled the watch: \(event.data)")
                        case "auth_revoked": throw CLIError("the node revoked the watch's credentials")
                        default: break
                        }
                        show(event)
                        seen += 1
                        if let count, seen >= count { return }
                    }
                }
                throw CLIError("the node closed the stream")
            }
        }
    }

    func show(_ event: SSEParser.Event) {
        guard case .object(let o) = (try? JSON.parse(Array(event.data.utf8))) ?? .null else {
            emit(output.json ? #"{"event":\#(JSON.string(event.name).serialized()),"data":\#(JSON.string(event.data).serialized())}"# : "\(event.name) \(event.data)")
            return
        }
        var p = "/"
        if case .string(let s)? = o["path"] { p = s }
        let data = o["data"] ?? .null
        if output.json {
            let line: JSON = .object(["event": .string(event.name), "path": .string(p), "data": data])
            emit(String(decoding: line.serializedBytes(pretty: false), as: UTF8.self))
        } else {
            emit("\(event.name) \(p) \(String(decoding: data.serializedBytes(pretty: false), as: UTF8.self))")
        }
    }
}

/// Splits a byte stream into server-sent events (`event:` and `data:` lines, blank-line ended).
struct SSEParser {
    struct Event { var name: String; var data: String }
    private var line: [UInt8] = []
    private var name = "message"
    private var data: [String] = []

    mutating func feed(_ bytes: [UInt8]) throws -> [Event] {
        var out: [Event] = []
        for b in bytes {
            if b != 0x0A {
                line.append(b)
                guard line.count <= WatchCommand.maxLineBytes else { throw CLIError("an event line exceeds \(WatchCommand.maxLineBytes) bytes") }
                continue
            }
            if line.last == 0x0D { line.removeLast() }
            let text = String(decoding: line, as: UTF8.self)
            line.removeAll(keepingCapacity: true)
            if text.isEmpty {
                if !data.isEmpty || name != "message" { out.append(Event(name: name, data: data.joined(separator: "\n"))) }
                name = "message"
                data = []
            } else if text.hasPrefix("event:") {
                name = text.dropFirst(6).trimmingCharacters(in: .whitespaces)
            } else if text.hasPrefix("data:") {
                var d = text.dropFirst(5)
                if d.first == " " { d = d.dropFirst() }
                data.append(String(d))
            }
        }
        return out
    }
}
