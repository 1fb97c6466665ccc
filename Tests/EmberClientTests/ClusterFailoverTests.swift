import EmberCore
import Foundation
import Testing
import EmberTestSupport
@testable import EmberClient
#if canImport(Glibc)
import Glibc
#endif

/// Three real `emberd` cluster nodes (mutual TLS between peers, certificates made with the
/// openssl CLI) for client failover tests.
final class ClusterProcesses: @unchecked Sendable {
    let ids = ["n1", "n2", "n3"]
    let dir = NSTemporaryDirectory() + "ember-client-cluster-" + UUID().uuidString
    var ports: [String: Int] = [:]
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
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try run(["req", "-x509"] + ec + ["-keyout", "\(dir)/ca.key", "-out", "\(dir)/ca.pem", "-days", "30", "-subj", "/CN=ca"])
        var peerPorts: [String: Int] = [:]
        for id in ids {
            try "subjectAltName=DNS:\(id)\nextendedKeyUsage=serverAuth,clientAuth\n".write(toFile: "\(dir)/\(id).ext", atomically: true, encoding: .utf8)
            try run(["req"] + ec + ["-keyout", "\(dir)/\(id).key", "-out", "\(dir)/\(id).csr", "-subj", "/CN=\(id)"])
            try run(["x509", "-req", "-in", "\(dir)/\(id).csr", "-CA", "\(dir)/ca.pem", "-CAkey", "\(dir)/ca.key",
                     "-CAcreateserial", "-out", "\(dir)/\(id).pem", "-days", "30", "-extfile", "\(dir)/\(id).ext"])
        }
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

    /// Clusters started before one elected a leader (see `start`).
    static let startAttempts = 3

    /// Starts the nodes and waits up to 60 s for a leader all agree on; returns the id of a node
    /// that exited meanwhile (nil: a leader was elected).
    private func spawnAndAwaitLeader(rules: String, peerPorts: [String: Int], attempt: Int) async throws -> String? {
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

@Suite(.serialized, .timeLimit(.minutes(2))) struct ClusterFailoverTests {
    /// `oneURL`: the client is given only its first node's URL and learns the others from the
    /// handshake (`--client-urls`); otherwise it is given all of them.
    @Test(.enabled(if: ClusterProcesses.openssl != nil), arguments: [false, true])
    func clientMovesToTheNextNodeWhenItsNodeDies(oneURL: Bool) async throws {
        let cluster = ClusterProcesses()
        var stopped = false
        defer { if !stopped { cluster.stop() } }
        try await cluster.start()
        let ns = "failover\(UInt32.random(in: 0...UInt32.max))"
        // Connected to a follower first. (Killing the leader instead can fail a write in flight
        // with "outcome unknown": the client is told, the SDK does not retry writes.)
        let leader = try #require(try await cluster.leader(among: cluster.ids))
        let order = cluster.ids.filter { $0 != leader } + [leader]
        let db = oneURL ? Database(urls: [cluster.url(order[0], ns: ns)], configuration: .fastReconnect)
                        : Database(urls: order.map { cluster.url($0, ns: ns) }, configuration: .fastReconnect)
        defer { db.shutdown() }
        let events = Recorder()
        db.reference(withPath: "room").observe(.childAdded) { s in events.add("\(s.key) \(s.value as? String ?? "")") }
        try await db.reference(withPath: "room/a").setValue("before")
        await events.wait { $0.contains("a before") }
        // The handshake named every node (--client-urls): the client knows all three.
        let connection = try #require(db.repo.connection)
        let known = await connection.urls
        #expect(known.count == 3, "\(known)")

        cluster.kill9(order[0])
        // Written while the client's node is dead: queued, then sent to the next node.
        let done = Recorder()
        db.reference(withPath: "room/b").setValue("during") { error, _ in done.add("done \(error == nil)") }
        await done.wait(timeout: .seconds(30)) { $0 == ["done true"] }
        // Another node's write reaches the listener through the new connection.
        var written = false
        let deadline = ContinuousClock.now + .seconds(20)
        while !written && ContinuousClock.now < deadline {
            // 503 while the survivors elect a leader (if n1 led): retry.
            let (status, _) = try await EmberServerProcess.http("PUT", "http://127.0.0.1:\(cluster.ports[order[1]]!)/room/c.json?ns=\(ns)", body: #""after""#)
            written = status == 200
            if !written { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(written)
        let seen = await events.wait(timeout: .seconds(20)) { $0.contains("b during") && $0.contains("c after") }
        #expect(seen.filter { $0 == "a before" }.count == 1, "no duplicate events after the resync: \(seen)")
        let value = try await db.reference(withPath: "room").getData()
        #expect((value.value as? [String: Any])?.count == 3)
        let now = await connection.url
        #expect(now != Database.websocketURL(for: cluster.url(order[0], ns: ns)), "connected to a surviving node")
        // The client's sockets are closed first, so every node must stop on SIGTERM.
        db.shutdown()
        try await Task.sleep(for: .milliseconds(300))
        stopped = true
        #expect(cluster.stop().isEmpty, "nodes that did not stop on SIGTERM")
    }
}
