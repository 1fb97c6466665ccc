import ArgumentParser
import EmberCore
import Foundation

/// `ember status`: one row per node. From the nodes given, the others are found through the
/// `clientURLs` each node reports (emberd --client-urls); a node that does not answer gets a row
/// saying so and makes the exit status non-zero.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "Show every node of the cluster: role, term, indexes, lag, connections.")
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions
    @Flag(help: "Only the nodes given with --node (no discovery).") var noDiscover = false

    struct Row {
        var url: String
        var status: KeyMap<JSON>?
        var error: String?
        /// The id other nodes list for this URL (shown when the node does not answer).
        var knownID: String?
        func str(_ k: String) -> String? { if case .string(let s)? = status?[k] { return s }; return nil }
        var version: String? {
            if case .object(let b)? = status?["build"], case .string(let v)? = b["version"] { return v }
            return nil
        }
        func int(_ k: String) -> Int64? { if case .int(let n)? = status?[k] { return n }; if case .double(let d)? = status?[k] { return Int64(d) }; return nil }
    }

    func run() async throws {
        try await runCLI {
            let rows = try await NodeClient.with(connection) { c in try await collect(c) }
            let leaderRow = rows.first { $0.str("role") == "leader" }
            let leaderCommit = leaderRow?.int("commitIndex")
            func lag(_ r: Row) -> Int64? {
                guard let lc = leaderCommit, let a = r.int("appliedIndex") else { return nil }
                return max(0, lc - a)
            }
            if output.json {
                var nodes: [JSON] = []
                for r in rows {
                    var o = r.status ?? [:]
                    o["url"] = .string(r.url)
                    if let e = r.error { o["error"] = .string(e) }
                    if o["id"] == nil, let id = r.knownID { o["id"] = .string(id) }
                    o["lag"] = lag(r).map { JSON.int($0) } ?? .null
                    nodes.append(.object(o))
                }
                let leaderID: JSON = leaderRow?.str("id").map { JSON.string($0) } ?? .null
                let out: JSON = .object(["leader": leaderID, "nodes": .array(nodes)])
                emit(String(decoding: out.serializedBytes(pretty: false), as: UTF8.self))
            } else {
                // VERSION: a rolling upgrade shows which members run which build ("-": before 0.4.0).
                let header = ["ID", "ROLE", "TERM", "COMMIT", "APPLIED", "LAG", "CONNS", "LISTENERS", "VERSION", "URL"]
                let table = rows.map { r -> [String] in
                    guard r.error == nil else { return [r.knownID ?? "?", "unreachable", "-", "-", "-", "-", "-", "-", "-", "\(r.url) (\(r.error!))"] }
                    return [r.str("id") ?? "?", r.str("role") ?? "?", r.int("term").map(String.init) ?? "-",
                            r.int("commitIndex").map(String.init) ?? "-", r.int("appliedIndex").map(String.init) ?? "-",
                            lag(r).map(String.init) ?? "-", r.int("connections").map(String.init) ?? "-",
                            r.int("listeners").map(String.init) ?? "-", r.version ?? "-", r.url]
                }
                emit(renderTable(header: header, rows: table))
                // A member that has not caught up since its start serves no client reads yet.
                for r in rows where r.status?["caughtUp"] == .bool(false) {
                    emit("\(r.str("id") ?? r.url) is catching up since its start: it serves no client reads yet (\(r.int("catchUpHeld") ?? 0) held)")
                }
                // The point-in-time archive, as the node writing it reports it.
                if let a = (leaderRow ?? rows.first(where: { $0.status?["archive"] != nil }))?.status?["archive"], case .object(let o) = a {
                    func f(_ k: String) -> String {
                        switch o[k] {
                        case .string(let s)?: return s
                        case .int(let n)?: return String(n)
                        case .double(let d)?: return String(format: "%.1f", d)
                        default: return "-"
                        }
                    }
                    var line = "archive \(f("location")): through index \(f("archivedThrough")), lag \(f("lagEntries")) entries / \(f("lagSeconds")) s, "
                        + "last segment \(f("lastSegmentAt")), last base \(f("lastBaseAt")), window from \(f("windowStart"))"
                    if case .array(let gaps)? = o["gaps"], !gaps.isEmpty { line += ", \(gaps.count) GAP(S)" }
                    if case .string(let e)? = o["lastError"] { line += ", error: \(e)" }
                    emit(line)
                }
            }
            let down = rows.filter { $0.error != nil }
            if !down.isEmpty {
                throw CLIError("\(down.count) of \(rows.count) node(s) did not answer: " + down.map { "\($0.url) (\($0.error!))" }.joined(separator: ", "))
            }
            if leaderRow == nil && rows.contains(where: { $0.str("role") != nil }) {
                throw CLIError("no node reports itself leader")
            }
        }
    }

    func collect(_ c: NodeClient) async throws -> [Row] {
        let given = connection.nodes.isEmpty ? [connection.node] : connection.nodes.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
        var rows: [String: Row] = [:]
        var pending = given
        var idToURL: [String: String] = [:]
        var urlToID: [String: String] = [:]
        while let url = pending.popLast() {
            if rows[url] != nil { continue }
            var row = await fetch(c, url)
            row.knownID = urlToID[url]
            rows[url] = row
            if let id = row.str("id") { idToURL[id] = url }
            guard !noDiscover, case .object(let urls)? = row.status?["clientURLs"] else { continue }
            for (id, v) in urls {
                guard case .string(let u) = v else { continue }
                let u2 = u.hasSuffix("/") ? String(u.dropLast()) : u
                if urlToID[u2] == nil { urlToID[u2] = id }
                // The same node may be known under two URLs (given vs advertised): keep one row.
                if idToURL[id] == nil && rows[u2] == nil && !pending.contains(u2) && id != row.str("id") { pending.append(u2) }
            }
        }
        var seenIDs = Set<String>()
        var out: [Row] = []
        let all = rows.values.map { row -> Row in
            var r = row
            if r.knownID == nil { r.knownID = urlToID[r.url] }
            return r
        }
        for r in all.sorted(by: { ($0.str("id") ?? $0.knownID ?? "~" + $0.url) < ($1.str("id") ?? $1.knownID ?? "~" + $1.url) }) {
            if let id = r.str("id") { if !seenIDs.insert(id).inserted { continue } }
            out.append(r)
        }
        return out
    }

    func fetch(_ c: NodeClient, _ url: String) async -> Row {
        do {
            let r = try await c.call(.GET, url + "/.ember/status")
            guard case .object(let o) = try r.json() else { return Row(url: url, status: nil, error: "bad status answer") }
            return Row(url: url, status: o, error: nil)
        } catch {
            let text = "\(error)"
            let reason = text.components(separatedBy: ": ").last ?? text
            return Row(url: url, status: nil, error: reason)
        }
    }
}
