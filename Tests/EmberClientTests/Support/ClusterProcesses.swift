import EmberCore
import Foundation
import Testing
import EmberTestSupport
@testable import EmberClient
#if canImport(Glibc)
import Glibc
#endif

/// Three real `emberd` cluster nodes (mutual TLS between peers, certificates made with the
/// openssl CLI) for client failover tests; `addLearner` adds non-voting members.
final class ClusterProcesses: @unchecked Sendable {
    let ids = ["n1", "n2", "n3"]
    /// Learners added (`addLearner`).
    private(set) var learners: [String] = []
    var all: [String] { ids + learners }
    let dir = TestDirectory.root + "ember-client-cluster-" + UUID().uuidString
    var ports: [String: Int] = [:]
    /// The voters' peer ports (a joining learner lists them).
    private var peerPorts: [String: Int] = [:]
    var processes: [String: ChildProcess] = [:]

    static let openssl = ["/usr/bin/openssl", "/bin/openssl"].first { FileManager.default.isExecutableFile(atPath: $0) }

    func url(_ id: String, ns: String) -> String { "http://127.0.0.1:\(ports[id]!)?ns=\(ns)" }

    private func run(_ args: [String]) throws { try ChildProcess.run(Self.openssl!, args) }

    /// Client and peer ports for every node, all distinct (one pick, every probe held open).
    private func pickPorts(_ peerPorts: inout [String: Int]) throws {
        let picked = try FreePorts.pick(2 * ids.count)
        for (i, id) in ids.enumerated() {
            ports[id] = picked[2 * i]
            peerPorts[id] = picked[2 * i + 1]
        }
    }

    func start() async throws {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try run(["req", "-x509"] + Self.ec + ["-keyout", "\(dir)/ca.key", "-out", "\(dir)/ca.pem", "-days", "30", "-subj", "/CN=ca"])
        var peerPorts: [String: Int] = [:]
        for id in ids { try makeCertificate(id) }
        try pickPorts(&peerPorts)
        let rules = "\(dir)/rules.json"
        try #"{"rules":{".read":true,".write":true}}"#.write(toFile: rules, atomically: true, encoding: .utf8)
        // A port picked free can be taken by another test's server before the node binds it
        // (suites run in parallel): a node that exits at start is a fresh cluster on new ports,
        // up to `startAttempts` times. Each node's stderr is kept in `dir` to say why.
        for attempt in 1...Self.startAttempts {
            let exited = try await spawnAndAwaitLeader(rules: rules, peerPorts: peerPorts, attempt: attempt)
            guard let exited else { return }
            guard attempt < Self.startAttempts else { throw TestFailure("node \(exited) exited at start on every attempt") }
            stop(keepingDirectory: true)
            for id in ids { try? FileManager.default.removeItem(atPath: "\(dir)/\(id)") }
            try pickPorts(&peerPorts)
        }
    }

    private static let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    private func makeCertificate(_ id: String) throws {
        try "subjectAltName=DNS:\(id)\nextendedKeyUsage=serverAuth,clientAuth\n".write(toFile: "\(dir)/\(id).ext", atomically: true, encoding: .utf8)
        try run(["req"] + Self.ec + ["-keyout", "\(dir)/\(id).key", "-out", "\(dir)/\(id).csr", "-subj", "/CN=\(id)"])
        try run(["x509", "-req", "-in", "\(dir)/\(id).csr", "-CA", "\(dir)/ca.pem", "-CAkey", "\(dir)/ca.key",
                 "-CAcreateserial", "-out", "\(dir)/\(id).pem", "-days", "30", "-extfile", "\(dir)/\(id).ext"])
    }

    /// Starts `id` empty (`--join`) and adds it as a learner through the leader (as
    /// `local-cluster add-node --learner --register` does), with its client URL, so handshakes
    /// name it; returns once it reports itself a learner.
    func addLearner(_ id: String) async throws {
        try makeCertificate(id)
        let picked = try FreePorts.pick(2)
        ports[id] = picked[0]
        let peer = "127.0.0.1:\(picked[1])"
        let leader = try #require(try await leader(among: ids))
        let log = "\(dir)/\(id).stderr"
        FileManager.default.createFile(atPath: log, contents: nil)
        learners.append(id)
        processes[id] = try ChildProcess(
            EmberServerProcess.binary,
            ["--data", "\(dir)/\(id)", "--port", String(picked[0]), "--rules", "\(dir)/rules.json", "--log-level", "error", "--node-id", id,
             "--client-urls", all.map { "\($0)=http://127.0.0.1:\(ports[$0]!)" }.joined(separator: ","),
             "--peers", (ids.map { "\($0)=127.0.0.1:\(peerPorts[$0]!)" } + ["\(id)=\(peer)"]).joined(separator: ","), "--join", "--peer-tls-cert", "\(dir)/\(id).pem",
             "--peer-tls-key", "\(dir)/\(id).key", "--peer-tls-ca", "\(dir)/ca.pem"],
            stderr: FileHandle(forWritingAtPath: log))
        try await until(seconds: 30, "\(id) answers") { try await self.status(id) != nil }
        let body = #"{"id":"\#(id)","address":"\#(peer)","clientURL":"http://127.0.0.1:\#(picked[0])","learner":true}"#
        let (code, answer) = try await EmberServerProcess.http("POST", "http://127.0.0.1:\(ports[leader]!)/.ember/members", body: body,
                                                              headers: ["Authorization": "Bearer owner"])
        guard code == 200 else { throw TestFailure("adding \(id) as a learner: \(code) \(answer)") }
        try await until(seconds: 60, "\(id) to be a learner") {
            guard case .string("learner")? = try await self.status(id)?["role"] else { return false }
            return true
        }
    }

    /// A node's `/.ember/status`, nil when it does not answer.
    func status(_ id: String) async throws -> JSON? {
        guard let (code, body) = try? await EmberServerProcess.http("GET", "http://127.0.0.1:\(ports[id]!)/.ember/status"),
              code == 200 else { return nil }
        return try JSON.parse(body)
    }

    private func until(seconds: Int, _ what: String, _ check: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if try await check() { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw TestFailure("waited \(seconds) s for \(what)")
    }

    /// Clusters started before one elected a leader (see `start`).
    static let startAttempts = 3

    /// Starts the nodes and waits up to 60 s for a leader all agree on; returns the id of a node
    /// that exited meanwhile (nil: a leader was elected).
    private func spawnAndAwaitLeader(rules: String, peerPorts: [String: Int], attempt: Int) async throws -> String? {
        self.peerPorts = peerPorts
        let peers = ids.map { "\($0)=127.0.0.1:\(peerPorts[$0]!)" }.joined(separator: ",")
        // What the nodes tell clients in the handshake: where the other members serve them.
        let clientURLs = ids.map { "\($0)=http://127.0.0.1:\(ports[$0]!)" }.joined(separator: ",")
        for id in ids {
            let log = "\(dir)/\(id)-\(attempt).stderr"
            FileManager.default.createFile(atPath: log, contents: nil)
            processes[id] = try ChildProcess(
                EmberServerProcess.binary,
                ["--data", "\(dir)/\(id)", "--port", String(ports[id]!), "--rules", rules, "--log-level", "error",
                 "--node-id", id, "--peers", peers, "--client-urls", clientURLs, "--peer-tls-cert", "\(dir)/\(id).pem",
                 "--peer-tls-key", "\(dir)/\(id).key", "--peer-tls-ca", "\(dir)/ca.pem"],
                stderr: FileHandle(forWritingAtPath: log))
        }
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if let leader = try? await leader(among: ids), ids.contains(leader) { return nil }
            if let dead = ids.first(where: { processes[$0]?.isRunning == false }) { return dead }
            try await Task.sleep(for: .milliseconds(100))
        }
        let logs = ids.map { id in "\(id): " + ((try? String(contentsOfFile: "\(dir)/\(id)-\(attempt).stderr", encoding: .utf8)) ?? "").suffix(400) }
        throw TestFailure("the cluster elected no leader; stderr: \(logs.joined(separator: " | "))")
    }

    /// The leader all of `among` agree on, or nil.
    func leader(among: [String]) async throws -> String? {
        var seen = Set<String>()
        for id in among {
            let (status, body) = try await EmberServerProcess.http("GET", "http://127.0.0.1:\(ports[id]!)/.ember/status")
            guard status == 200, case .string(let l)? = try JSON.parse(body)["leader"] else { return nil }
            seen.insert(l)
        }
        return seen.count == 1 ? seen.first : nil
    }

    func kill9(_ id: String) { processes[id]?.kill9() }

    /// SIGTERM, then SIGKILL for a node that has not exited within 15 s: a node whose graceful
    /// shutdown stalls fails the test (it prints the ids) instead of hanging the suite.
    @discardableResult func stop(keepingDirectory: Bool = false) -> [String] {
        var stuck: [String] = []
        for p in processes.values { p.terminate() }
        let deadline = ContinuousClock.now + .seconds(15)
        for (id, p) in processes.sorted(by: { $0.key < $1.key }) {
            if !p.stop(grace: max(.zero, deadline - ContinuousClock.now), terminate: false) { stuck.append(id) }
        }
        if !keepingDirectory { try? FileManager.default.removeItem(atPath: dir) }
        return stuck
    }
}
