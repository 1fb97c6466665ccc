import ArgumentParser
import EmberCore
import Foundation
import NIOCore

/// `ember feed PATTERN`: a pull feed's events (`GET /.ember/feed`) as JSON lines, one CloudEvent
/// per line with its `cursor`; `--from CURSOR` resumes after a cursor a previous run printed.
struct FeedCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "feed", abstract: "Print a feed's events as JSON lines (resumable with --from).")
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The feed's path pattern, as defined in /.settings/triggers.json (\"feed\": true).") var pattern: String
    @Option(help: "Resume after this cursor (a log index; default: the oldest the feed keeps).") var from: UInt64?
    @Option(help: "Exit after this many events.") var count: Int?

    func run() async throws {
        try await runCLI {
            try await NodeClient.with(connection, streaming: true) { c in
                var q = ["path=" + (pattern.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed.subtracting(CharacterSet(charactersIn: "&=+"))) ?? pattern)]
                if let ns = c.options.ns { q.append("ns=\(ns)") }
                if let from { q.append("from=\(from)") }
                let response = try await c.openEventStream(c.options.node + "/.ember/feed?" + q.joined(separator: "&"))
                var parser = SSEParser()
                var seen = 0
                for try await buffer in response.body {
                    for event in try parser.feed(Array(buffer: buffer)) where event.name == "change" {
                        guard case .array(let events) = (try? JSON.parse(Array(event.data.utf8))) ?? .null else {
                            throw CLIError("the node sent a malformed feed event")
                        }
                        for case .object(var e) in events {
                            e["cursor"] = e["sequence"].flatMap { $0.stringValue }.flatMap { Int64($0) }.map { .int($0) } ?? .null
                            emit(JSON.object(e).serialized())
                            seen += 1
                            if let count, seen >= count { return }
                        }
                    }
                }
                throw CLIError("the node closed the feed (resume with --from the last cursor printed)")
            }
        }
    }
}
