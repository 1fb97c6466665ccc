import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore

/// Quorum-durable small writes against a 3-node Ember cluster (mutual TLS between peers) and a
/// 3-member etcd cluster, both on loopback, in one invocation; prints both and the ratio.
/// Clients are spread over the nodes (worker w writes to node w mod 3), so for both systems two
/// thirds of the writes go through a follower that forwards them to the leader.
struct ClusterBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cluster", abstract: "3-node Ember vs 3-member etcd: quorum-durable writes/s and latency.")

    @Option(help: "emberd binary.")
    var emberd = ".build/release/emberd"

    @Option(help: "etcd binary (Debian etcd-server; scripts/bootstrap.sh --with-etcd).")
    var etcd = "/usr/bin/etcd"

    @Option(help: "openssl binary (the cluster's certificates).")
    var openssl = "/usr/bin/openssl"

    @Option(help: "Concurrent clients.")
    var clients = 64

    @Option(help: "Seconds per run (after a 1 s warm-up).")
    var duration = 10.0

    @Option(help: "Value size in bytes.")
    var valueSize = 16

    @Flag(help: "Skip the etcd run.")
    var skipEtcd = false

    static let nodes = 3

    func run() async throws {
        let bench = WriteBench.parseOrExit(["--clients", "\(clients)", "--duration", "\(duration)", "--value-size", "\(valueSize)"])
        let http = bench.makeClient()
        var processes: [Process] = []
        do {
            try await runAll(bench, http, &processes)
        } catch {
            for p in processes where p.isRunning { p.terminate() }
            try? await http.shutdown()
            throw error
        }
        for p in processes where p.isRunning { p.terminate() }
        try await http.shutdown()
    }

    func runAll(_ bench: WriteBench, _ http: HTTPClient, _ processes: inout [Process]) async throws {
        let dir = NSTemporaryDirectory() + "ember-cluster-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let ids = (1...Self.nodes).map { "n\($0)" }
        try makeCertificates(dir, ids)
        let base = 20_000 + Int.random(in: 0..<1000) * 10
        let peers = ids.enumerated().map { "\($1)=127.0.0.1:\(base + 5 + $0)" }.joined(separator: ",")
        var urls: [String] = []
        for (i, id) in ids.enumerated() {
            let port = base + i
            processes.append(try bench.launch(emberd, [
                "--data", "\(dir)/\(id)", "--port", "\(port)", "--log-level", "warning", "--node-id", id, "--peers", peers,
                "--tls-cert", "\(dir)/\(id).pem", "--tls-key", "\(dir)/\(id).key", "--tls-ca", "\(dir)/ca.pem",
            ]))
            urls.append("http://127.0.0.1:\(port)")
        }
        for url in urls { try await bench.waitReady(http, url + "/.json") }
        try await waitForLeader(http, urls)
        let value = String(repeating: "x", count: valueSize)
        let nodeURLs = urls
        print("ember-bench cluster: \(Self.nodes) nodes each, \(clients) clients spread over them, \(valueSize)-byte values, \(duration) s per run")
        let ember = try await bench.load(http, name: "ember (3 nodes)") { worker, i in
            var r = HTTPClientRequest(url: "\(nodeURLs[worker % nodeURLs.count])/bench/w\(worker)/k\(i % 1000).json?print=silent")
            r.method = .PUT
            r.body = .bytes(ByteBuffer(string: "\"\(value)\""))
            return r
        }
        ember.print()
        for p in processes where p.isRunning { p.terminate() }
        guard !skipEtcd else { return }

        let etcdBase = base + 100
        let cluster = (0..<Self.nodes).map { "e\($0 + 1)=http://127.0.0.1:\(etcdBase + 10 + $0)" }.joined(separator: ",")
        var etcdURLs: [String] = []
        for i in 0..<Self.nodes {
            let client = "http://127.0.0.1:\(etcdBase + i)", peer = "http://127.0.0.1:\(etcdBase + 10 + i)"
            processes.append(try bench.launch(etcd, [
                "--data-dir", "\(dir)/etcd\(i + 1)", "--name", "e\(i + 1)",
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", cluster, "--initial-cluster-state", "new", "--log-level", "error",
            ]))
            etcdURLs.append(client)
        }
        for url in etcdURLs { try await bench.waitReady(http, url + "/health") }
        let b64value = Data(("\"" + value + "\"").utf8).base64EncodedString()
        let members = etcdURLs
        let etcdResult = try await bench.load(http, name: "etcd (3 members)") { worker, i in
            var r = HTTPClientRequest(url: "\(members[worker % members.count])/v3/kv/put")
            r.method = .POST
            let key = Data("/bench/w\(worker)/k\(i % 1000)".utf8).base64EncodedString()
            r.body = .bytes(ByteBuffer(string: #"{"key":"\#(key)","value":"\#(b64value)"}"#))
            return r
        }
        etcdResult.print()
        print(String(format: "ratio ember/etcd: throughput %.2fx, p50 latency %.2fx, p99 latency %.2fx",
                     ember.rate / etcdResult.rate, ember.p50 / etcdResult.p50, ember.p99 / etcdResult.p99))
    }

    func makeCertificates(_ dir: String, _ ids: [String]) throws {
        func run(_ args: [String]) throws {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: openssl)
            p.arguments = args
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            p.waitUntilExit()
            guard p.terminationStatus == 0 else { throw ValidationError("openssl \(args.first ?? "") failed") }
        }
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try run(["req", "-x509"] + ec + ["-keyout", "\(dir)/ca.key", "-out", "\(dir)/ca.pem", "-days", "30", "-subj", "/CN=bench-ca"])
        for id in ids {
            try "subjectAltName=DNS:\(id)\nextendedKeyUsage=serverAuth,clientAuth\n".write(
                toFile: "\(dir)/\(id).ext", atomically: true, encoding: .utf8)
            try run(["req"] + ec + ["-keyout", "\(dir)/\(id).key", "-out", "\(dir)/\(id).csr", "-subj", "/CN=\(id)"])
            try run(["x509", "-req", "-in", "\(dir)/\(id).csr", "-CA", "\(dir)/ca.pem", "-CAkey", "\(dir)/ca.key",
                     "-CAcreateserial", "-out", "\(dir)/\(id).pem", "-days", "30", "-extfile", "\(dir)/\(id).ext"])
        }
    }

    /// Waits until every node names the same leader.
    func waitForLeader(_ http: HTTPClient, _ urls: [String]) async throws {
        for _ in 0..<600 {
            var leaders = Set<String>()
            for url in urls {
                guard let r = try? await http.execute(HTTPClientRequest(url: url + "/.ember/status"), timeout: .seconds(1)),
                      let body = try? await r.body.collect(upTo: 1 << 20),
                      let obj = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any],
                      let leader = obj["leader"] as? String else { leaders.insert(""); continue }
                leaders.insert(leader)
            }
            if leaders.count == 1, leaders.first != "" { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ValidationError("the Ember cluster elected no leader")
    }
}
