import ArgumentParser
import EmberCore
import Foundation

/// Finds the leader's client URL from the node given (its status names the leader; the
/// leader's URL comes from `clientURLs`). Falls back to the node given.
func leaderURL(_ c: NodeClient) async throws -> String {
    let r = try await c.call(.GET, c.options.node + "/.ember/status")
    guard case .object(let o) = try r.json() else { return c.options.node }
    if case .string("leader")? = o["role"] { return c.options.node }
    if case .string(let leader)? = o["leader"], case .object(let urls)? = o["clientURLs"], case .string(let u)? = urls[leader] {
        return u.hasSuffix("/") ? String(u.dropLast()) : u
    }
    return c.options.node
}

func printResult(_ r: NodeResponse, json: Bool, fallback: String) {
    if json { emit(r.body.isEmpty ? "{}" : r.text.trimmingCharacters(in: .newlines)) } else { emit(fallback) }
}

/// `ember members add|remove|promote|demote`: membership changes through the leader (`POST
/// /.ember/members`, `DELETE /.ember/members/ID`, `POST /.ember/members/ID/promote|demote`).
struct MembersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "members", abstract: "Change cluster membership.",
        subcommands: [Add.self, Remove.self, Promote.self, Demote.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add node ID whose peer listener is at ADDR (host:port).")
        @OptionGroup var connection: ConnectionOptions
        @OptionGroup var output: OutputOptions
        @Argument var id: String
        @Argument var address: String
        @Option(help: "The URL clients reach the new node at (http(s)://host:port); the cluster announces it to clients in the wire handshake.")
        var clientUrl: String?
        @Flag(help: "Add it as a learner: a non-voting member that replicates and serves reads and listeners without joining the commit quorum (promote it later with `ember members promote ID`).")
        var learner = false

        func run() async throws {
            try await runCLI {
                guard address.contains(":") else { throw CLIError("ADDR must be host:port") }
                if let u = clientUrl, !(u.hasPrefix("http://") || u.hasPrefix("https://")) {
                    throw CLIError("--client-url must be an http(s) URL")
                }
                try await NodeClient.with(connection) { c in
                    let url = try await leaderURL(c) + "/.ember/members"
                    var fields: KeyMap<JSON> = ["id": .string(id), "address": .string(address)]
                    if let u = clientUrl { fields["clientURL"] = .string(u) }
                    if learner { fields["learner"] = .bool(true) }
                    let body: JSON = .object(fields)
                    let r = try await c.call(.POST, url, body: body.serializedBytes())
                    printResult(r, json: output.json, fallback: "added \(id) at \(address)\(learner ? " as a learner" : "")")
                }
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove node ID from the cluster.")
        @OptionGroup var connection: ConnectionOptions
        @OptionGroup var output: OutputOptions
        @Argument var id: String

        func run() async throws {
            try await runCLI {
                try await NodeClient.with(connection) { c in
                    let encoded = id.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-."))) ?? id
                    let r = try await c.call(.DELETE, try await leaderURL(c) + "/.ember/members/" + encoded)
                    printResult(r, json: output.json, fallback: "removed \(id)")
                }
            }
        }
    }

    struct Promote: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make learner ID a voter (refused, with its lag, while it is behind the leader's log).")
        @OptionGroup var connection: ConnectionOptions
        @OptionGroup var output: OutputOptions
        @Argument var id: String

        func run() async throws {
            try await runCLI { try await MembersCommand.changeRole(connection, output, id, "promote", done: "promoted \(id) to voter") }
        }
    }

    struct Demote: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Make voter ID a learner (it keeps replicating and serving reads).")
        @OptionGroup var connection: ConnectionOptions
        @OptionGroup var output: OutputOptions
        @Argument var id: String

        func run() async throws {
            try await runCLI { try await MembersCommand.changeRole(connection, output, id, "demote", done: "demoted \(id) to learner") }
        }
    }

    static func changeRole(_ connection: ConnectionOptions, _ output: OutputOptions, _ id: String, _ verb: String, done: String) async throws {
        try await NodeClient.with(connection) { c in
            let encoded = id.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-."))) ?? id
            let r = try await c.call(.POST, try await leaderURL(c) + "/.ember/members/" + encoded + "/" + verb)
            printResult(r, json: output.json, fallback: done)
        }
    }
}

/// `ember leader transfer --to ID` (`POST /.ember/leader/transfer`).
struct LeaderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "leader", abstract: "Leadership.", subcommands: [Transfer.self])

    struct Transfer: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Hand leadership to node ID.")
        @OptionGroup var connection: ConnectionOptions
        @OptionGroup var output: OutputOptions
        @Option(help: "The node to become leader.") var to: String

        func run() async throws {
            try await runCLI {
                try await NodeClient.with(connection) { c in
                    let body: JSON = .object(["to": .string(to)])
                    let r = try await c.call(.POST, try await leaderURL(c) + "/.ember/leader/transfer", body: body.serializedBytes())
                    printResult(r, json: output.json, fallback: "leadership transferred to \(to)")
                }
            }
        }
    }
}
