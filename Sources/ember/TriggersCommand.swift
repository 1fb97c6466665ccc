import ArgumentParser
import EmberCore
import Foundation

/// `ember triggers`: database triggers (issue 36) through `/.settings/triggers.json` and
/// `/.ember/triggers` (admin).
struct TriggersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "triggers", abstract: "List, define, pause, resume and replay database triggers.",
        subcommands: [List.self, Get.self, Set.self, Pause.self, Resume.self, Replay.self, Dead.self])

    static func settingsURL(_ c: NodeClient) -> String {
        c.options.node + "/.settings/triggers.json" + (c.options.ns.map { "?ns=\($0)" } ?? "")
    }

    static func adminURL(_ c: NodeClient, _ suffix: String = "") -> String {
        c.options.node + "/.ember/triggers" + suffix + (c.options.ns.map { "?ns=\($0)" } ?? "")
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "Each trigger's state (cursor, pending, dead letters, last error).")
        @OptionGroup var connection: ConnectionOptions
        @OptionGroup var output: OutputOptions

        func run() async throws {
            try await runCLI {
                try await NodeClient.with(connection) { c in
                    let r = try await c.call(.GET, TriggersCommand.adminURL(c))
                    if output.json { emit(r.text.trimmingCharacters(in: .newlines)); return }
                    guard case .object(let ts)? = try r.json()["triggers"] else { throw CLIError("unexpected answer: \(r.text.prefix(200))") }
                    var rows = [["TRIGGER", "PATH", "ON", "CURSOR", "PENDING", "DEAD", "STATE", "LAST ERROR"]]
                    for name in ts.keys.sorted() {
                        let t = ts[name]!
                        let d = t["definition"], s = t["state"]
                        let on = (d?["on"].flatMap { if case .array(let a) = $0 { return a.compactMap(\.stringValue).joined(separator: ",") } else { return nil } }) ?? ""
                        var state = "active"
                        if s?["paused"] == .bool(true) { state = "paused" }
                        if let h = s?["halted"]?.stringValue { state = "halted: \(h)" }
                        if s?["behind"] == .bool(true) { state += " (behind)" }
                        func num(_ j: JSON?) -> String { j.map { $0.serialized() } ?? "" }
                        rows.append([name, d?["path"]?.stringValue ?? "", on, num(s?["cursor"]), num(s?["pending"]), num(s?["deadLetters"]),
                                     state, t["node"]?["lastError"]?.stringValue ?? ""])
                    }
                    let widths = rows[0].indices.map { i in rows.map { $0[i].count }.max() ?? 0 }
                    for row in rows { emit(zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  ")) }
                }
            }
        }
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "get", abstract: "Print the definitions in force (/.settings/triggers.json).")
        @OptionGroup var connection: ConnectionOptions

        func run() async throws {
            try await runCLI {
                try await NodeClient.with(connection) { c in
                    emit(try await c.call(.GET, TriggersCommand.settingsURL(c)).text.trimmingCharacters(in: .newlines))
                }
            }
        }
    }

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "set", abstract: "Replace the namespace's triggers with FILE's (JSON).")
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "Triggers file: {\"name\": {\"path\": ..., \"on\": [...], \"url\": ..., \"secret\": ...}}.") var file: String

        func run() async throws {
            try await runCLI {
                guard let data = FileManager.default.contents(atPath: file) else { throw CLIError("cannot read \(file)") }
                try await NodeClient.with(connection) { c in
                    try await c.call(.PUT, TriggersCommand.settingsURL(c), body: Array(data))
                    note("triggers replaced")
                }
            }
        }
    }

    struct Pause: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "pause", abstract: "Stop delivering NAME's events (they are kept).")
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "Trigger name.") var name: String

        func run() async throws {
            try await runCLI {
                try await NodeClient.with(connection) { c in
                    try await c.call(.POST, TriggersCommand.adminURL(c, "/\(name)/pause"))
                    note("\(name) paused")
                }
            }
        }
    }

    struct Resume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "resume", abstract: "Deliver NAME's events again (after pause, or a stop on failure).")
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "Trigger name.") var name: String

        func run() async throws {
            try await runCLI {
                try await NodeClient.with(connection) { c in
                    try await c.call(.POST, TriggersCommand.adminURL(c, "/\(name)/resume"))
                    note("\(name) resumed")
                }
            }
        }
    }

    struct Replay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "replay", abstract: "Deliver NAME's dead letters again (those from log index --from on).")
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "Trigger name.") var name: String
        @Option(help: "First log index whose dead letters are replayed.") var from: UInt64 = 0

        func run() async throws {
            try await runCLI {
                try await NodeClient.with(connection) { c in
                    try await c.call(.POST, TriggersCommand.adminURL(c, "/\(name)/replay"), body: Array("{\"from\": \(from)}".utf8))
                    note("\(name): dead letters from index \(from) replayed")
                }
            }
        }
    }

    struct Dead: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "dead", abstract: "Print NAME's dead letters (JSON).")
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "Trigger name.") var name: String

        func run() async throws {
            try await runCLI {
                try await NodeClient.with(connection) { c in
                    emit(try await c.call(.GET, TriggersCommand.adminURL(c, "/\(name)/dead")).text.trimmingCharacters(in: .newlines))
                }
            }
        }
    }
}
