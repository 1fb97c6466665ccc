import ArgumentParser
import EmberCore
import Foundation
import NIOHTTP1

/// Output switch shared by data commands.
struct OutputOptions: ParsableArguments {
    @Flag(help: "Machine-readable output (compact JSON).")
    var json = false
}

/// Prints a JSON answer: pretty for people, compact with --json.
func printJSON(_ bytes: [UInt8], compact: Bool) throws {
    let value: JSON
    do { value = try JSON.parse(bytes) } catch { throw CLIError("node answered invalid JSON") }
    emit(String(decoding: value.serializedBytes(pretty: !compact), as: UTF8.self))
}

func parseValue(_ arg: String) throws -> [UInt8] {
    let bytes = try readValueArgument(arg)
    do { _ = try JSON.parse(bytes) } catch { throw CLIError("the value is not valid JSON: \(error)") }
    return bytes
}

struct GetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "get", abstract: "Read the value at PATH.")
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions
    @Argument(help: "Database path, e.g. /users/ada.") var path: String
    @Flag(help: "Only the child keys (shallow=true).") var shallow = false
    @Flag(help: "Read through the leader's commit point (consistency=linearizable).") var linearizable = false

    func run() async throws {
        try await runCLI {
            try await NodeClient.with(connection) { c in
                var q: [String] = []
                if shallow { q.append("shallow=true") }
                if linearizable { q.append("consistency=linearizable") }
                let r = try await c.call(.GET, c.dataURL(path, query: q))
                try printJSON(r.body, compact: output.json)
            }
        }
    }
}

struct SetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "set", abstract: "Replace the value at PATH (PUT).")
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions
    @Argument(help: "Database path.") var path: String
    @Argument(help: "JSON value, @FILE, or - for stdin.") var value: String

    func run() async throws {
        try await runCLI {
            let body = try parseValue(value)
            try await NodeClient.with(connection) { c in
                let r = try await c.call(.PUT, c.dataURL(path), body: body)
                try printJSON(r.body, compact: output.json)
            }
        }
    }
}

struct UpdateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "update", abstract: "Multi-path update at PATH (PATCH with a JSON object).")
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions
    @Argument(help: "Database path.") var path: String
    @Argument(help: "JSON object of relative paths to values, @FILE, or -.") var value: String

    func run() async throws {
        try await runCLI {
            let body = try parseValue(value)
            guard case .object = try JSON.parse(body) else { throw CLIError("update needs a JSON object") }
            try await NodeClient.with(connection) { c in
                let r = try await c.call(.PATCH, c.dataURL(path), body: body)
                try printJSON(r.body, compact: output.json)
            }
        }
    }
}

struct PushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "push", abstract: "Add a child with a generated push id under PATH (POST); prints its key.")
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions
    @Argument(help: "Database path.") var path: String
    @Argument(help: "JSON value, @FILE, or -.") var value: String

    func run() async throws {
        try await runCLI {
            let body = try parseValue(value)
            try await NodeClient.with(connection) { c in
                let r = try await c.call(.POST, c.dataURL(path), body: body)
                guard case .object(let o) = try r.json(), case .string(let name)? = o["name"] else {
                    throw CLIError("node answered without a name")
                }
                emit(output.json ? r.text : name)
            }
        }
    }
}

struct DeleteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete", abstract: "Remove the value at PATH.")
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions
    @Argument(help: "Database path.") var path: String

    func run() async throws {
        try await runCLI {
            try await NodeClient.with(connection) { c in
                try await c.call(.DELETE, c.dataURL(path))
                if output.json { emit("null") }
            }
        }
    }
}

struct RulesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rules", abstract: "Read or replace the security rules (/.settings/rules.json).",
        subcommands: [GetRules.self, SetRules.self])

    struct GetRules: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "get", abstract: "Print the rules.")
        @OptionGroup var connection: ConnectionOptions

        func run() async throws {
            try await runCLI {
                try await NodeClient.with(connection) { c in
                    let r = try await c.call(.GET, c.options.node + "/.settings/rules.json")
                    emit(r.text.trimmingCharacters(in: .newlines))
                }
            }
        }
    }

    struct SetRules: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "set", abstract: "Replace the rules with FILE's.")
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "Rules file (JSON with comments, as the Firebase console takes it).") var file: String

        func run() async throws {
            try await runCLI {
                guard let data = FileManager.default.contents(atPath: file) else { throw CLIError("cannot read \(file)") }
                try await NodeClient.with(connection) { c in
                    var request = c.makeRequest(.PUT, c.options.node + "/.settings/rules.json", body: Array(data))
                    request.headers.replaceOrAdd(name: "Content-Type", value: "application/json")
                    let response = try await c.send(request)
                    let body = Array(buffer: try await response.body.collect(upTo: NodeClient.maxResponseBytes))
                    guard (200..<300).contains(Int(response.status.code)) else {
                        throw NodeClient.failure(.PUT, request.url, Int(response.status.code), body)
                    }
                    note("rules replaced")
                }
            }
        }
    }
}
