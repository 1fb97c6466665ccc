import ArgumentParser
import EmberCore
import Foundation

/// `ember defrag --node URL` (`POST /.ember/defrag`, admin): rewrites a running node's data file
/// compactly and switches to it. `--cluster`: every member of the node's cluster, one at a
/// time, the leader last after handing its leadership to a member already done.
struct DefragCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "defrag", abstract: "Rewrite a running node's data file compactly (online; gives free pages' disk back).")
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions
    @Flag(help: "Every member of the node's cluster, one at a time, the leader last (after a leadership transfer).")
    var cluster = false

    /// How long a leadership transfer may take before the command gives up (the leader is then
    /// left as it is, not defragged).
    static let transferWait: Duration = .seconds(20)

    func run() async throws {
        try await runCLI {
            try await NodeClient.with(connection) { c in
                guard cluster else {
                    report(c.options.node, try await Self.defrag(c, c.options.node))
                    return
                }
                let (members, leaderID) = try await Self.members(c)
                guard let leaderID, members.count > 1 else {
                    report(c.options.node, try await Self.defrag(c, c.options.node))
                    return
                }
                var done: [String] = []
                for (id, url) in members.sorted(by: { $0.key < $1.key }) where id != leaderID {
                    report(url, try await Self.defrag(c, url))
                    done.append(id)
                }
                let leaderURL = members[leaderID]!
                let to = done[0]
                let body: JSON = .object(["to": .string(to)])
                try await c.call(.POST, leaderURL + "/.ember/leader/transfer", body: body.serializedBytes())
                try await Self.waitForLeader(c, at: leaderURL, other: leaderID)
                if !output.json { emit("leadership moved from \(leaderID) to \(to)") }
                report(leaderURL, try await Self.defrag(c, leaderURL))
            }
        }
    }

    func report(_ url: String, _ r: KeyMap<JSON>) {
        if output.json {
            var o = r
            o["node"] = .string(url)
            emit(String(decoding: JSON.object(o).serializedBytes(pretty: false), as: UTF8.self))
            return
        }
        func num(_ k: String) -> Double { if case .int(let n)? = r[k] { return Double(n) }; if case .double(let d)? = r[k] { return d }; return 0 }
        emit("defragged \(url): \(TransferProgress.size(Int64(num("bytesBefore")))) → \(TransferProgress.size(Int64(num("bytesAfter")))), "
             + "writes paused \(String(format: "%.1f", num("pauseMs"))) ms")
    }

    static func defrag(_ c: NodeClient, _ url: String) async throws -> KeyMap<JSON> {
        let r = try await c.call(.POST, url + "/.ember/defrag")
        guard case .object(let o) = try r.json() else { throw CLIError("\(url) answered no defrag report") }
        return o
    }

    /// The cluster's members by id with their client URLs, and the leader's id.
    static func members(_ c: NodeClient) async throws -> ([String: String], String?) {
        let r = try await c.call(.GET, c.options.node + "/.ember/status")
        guard case .object(let o) = try r.json() else { throw CLIError("\(c.options.node) answered no status") }
        var urls: [String: String] = [:]
        if case .object(let u)? = o["clientURLs"] {
            for (id, v) in u { if case .string(let s) = v { urls[id] = s.hasSuffix("/") ? String(s.dropLast()) : s } }
        }
        if case .string(let l)? = o["leader"] { return (urls, l) }
        return (urls, nil)
    }

    /// Waits until the node at `url` reports a leader other than `other`.
    static func waitForLeader(_ c: NodeClient, at url: String, other: String) async throws {
        let deadline = ContinuousClock.now + transferWait
        while ContinuousClock.now < deadline {
            let r = try await c.call(.GET, url + "/.ember/status")
            if case .object(let o) = try r.json(), case .string(let l)? = o["leader"], l != other,
               case .string(let role)? = o["role"], role != "leader" {
                return
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw CLIError("leadership did not move from \(other) within \(transferWait); its defrag was not started")
    }
}
