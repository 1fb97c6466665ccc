import ArgumentParser
import EmberCore
import Foundation

/// `ember check hashes` (`POST /.ember/check/hashes`, admin): etcd's corrupt check on demand.
/// The node hashes its state, asks its voters for their hashes at the same applied index, and
/// raises the CORRUPT alarm on itself when a majority holds another hash. `--cluster`: every
/// member does so in turn. Exits non-zero when a member is corrupt or could not be compared.
struct CheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check", abstract: "Check a cluster's consistency.", subcommands: [Hashes.self])

    struct Hashes: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Compare the members' state hashes at one applied index (a member that disagrees with the majority raises CORRUPT).")
        @OptionGroup var connection: ConnectionOptions
        @OptionGroup var output: OutputOptions
        @Flag(help: "Every member of the node's cluster (else only --node).")
        var cluster = false

        func run() async throws {
            try await runCLI {
                try await NodeClient.with(connection) { c in
                    var targets = [c.options.node]
                    if cluster {
                        let (members, _) = try await DefragCommand.members(c)
                        if !members.isEmpty { targets = members.keys.sorted().map { members[$0]! } }
                    }
                    var failed: [String] = []
                    for url in targets {
                        do {
                            let r = try await c.call(.POST, url + "/.ember/check/hashes")
                            guard case .object(let o) = try r.json() else { throw CLIError("\(url) answered no verdict") }
                            if let problem = report(url, o) { failed.append(problem) }
                        } catch {
                            failed.append("\(url): \(error)")
                            if output.json {
                                emit(String(decoding: JSON.object(["url": .string(url), "error": .string("\(error)")]).serializedBytes(pretty: false),
                                            as: UTF8.self))
                            } else {
                                emit("\(url): \(error)")
                            }
                        }
                    }
                    if !failed.isEmpty { throw CLIError(failed.joined(separator: "; ")) }
                }
            }
        }

        /// Prints one member's verdict; returns the problem, if any.
        func report(_ url: String, _ o: KeyMap<JSON>) -> String? {
            func text(_ k: String) -> String { if case .string(let s)? = o[k] { return s }; return "?" }
            func flag(_ k: String) -> Bool { if case .bool(let b)? = o[k] { return b }; return false }
            let index: Int64 = { if case .int(let n)? = o["appliedIndex"] { return n }; return -1 }()
            let missing: [String] = { if case .array(let a)? = o["missing"] { return a.compactMap { if case .string(let s) = $0 { s } else { nil } } }; return [] }()
            let node = text("node")
            let problem: String?
            if flag("corrupt") {
                problem = "\(node) is CORRUPT: \(text("alarm"))"
            } else if !flag("conclusive") {
                problem = "\(node): no majority answered at applied index \(index) (missing: \(missing.joined(separator: ", "))); writes going on or members down: try again"
            } else {
                problem = nil
            }
            if output.json {
                var out = o
                out["url"] = .string(url)
                emit(String(decoding: JSON.object(out).serializedBytes(pretty: false), as: UTF8.self))
            } else {
                let hash = text("stateHash")
                emit("\(node) (\(url)): applied index \(index), state hash \(hash.prefix(12)) — "
                     + (problem == nil ? "agrees with the majority" + (missing.isEmpty ? "" : " (not heard: \(missing.joined(separator: ", ")))") : problem!))
            }
            return problem
        }
    }
}
