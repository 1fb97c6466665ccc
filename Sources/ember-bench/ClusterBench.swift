import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
#if canImport(Glibc)
import Glibc
#endif

/// Quorum-durable small writes against a 3-node Ember cluster (mutual TLS between peers) and a
/// 3-member etcd cluster, both on loopback, in one invocation; prints both and the ratio.
/// Clients are spread over the nodes (worker w writes to node w mod 3), so for both systems two
/// thirds of the writes go through a follower that forwards them to the leader.
struct ClusterBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cluster", abstract: "3-node Ember vs 3-member etcd: quorum-durable writes/s and latency.")

    @OptionGroup var load: LoadOptions

    @Option(help: "openssl binary (the cluster's certificates).")
    var openssl = "/usr/bin/openssl"

    @Flag(help: "Skip the etcd run.")
    var skipEtcd = false

    static let nodes = 3

    var clients: Int { load.clients }
    var duration: Double { load.duration }
    var valueSize: Int { load.valueSize }
    var emberd: String { load.emberd }
    var etcd: String { load.etcd }

    func run() async throws {
        let bench = HTTPLoad(clients: load.clients, duration: load.duration)
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

    func runAll(_ bench: HTTPLoad, _ http: HTTPClient, _ processes: inout [Process]) async throws {
        let dir = NSTemporaryDirectory() + "ember-cluster-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let ids = (1...Self.nodes).map { "n\($0)" }
        try makeCertificates(dir, ids)
        let base = 20_000 + Int.random(in: 0..<1000) * 10
        let peers = ids.enumerated().map { "\($1)=127.0.0.1:\(base + 5 + $0)" }.joined(separator: ",")
        var urls: [String] = []
        for (i, id) in ids.enumerated() {
            let port = base + i
            processes.append(try HTTPLoad.launch(emberd, [
                "--data", "\(dir)/\(id)", "--port", "\(port)", "--log-level", "warning", "--node-id", id, "--peers", peers,
                "--peer-tls-cert", "\(dir)/\(id).pem", "--peer-tls-key", "\(dir)/\(id).key", "--peer-tls-ca", "\(dir)/ca.pem",
            ]))
            urls.append("http://127.0.0.1:\(port)")
        }
        for url in urls { try await HTTPLoad.waitReady(http, url + "/.json") }
        try await waitForLeader(http, urls)
        let valueSize = valueSize  // captured by the load closures
        let nodeURLs = urls
        print("ember-bench cluster: \(Self.nodes) nodes each, \(clients) clients spread over them, \(valueSize)-byte values, \(duration) s per run")
        // Write→listener latency on a follower, measured during the write load: a probe writes
        // its send time (µs) at the leader every `probeMillis`; an SSE stream on a follower reads it.
        let (leaderURL, followerURL) = try await roles(http, nodeURLs)
        let probeSeconds = duration + 1
        let probe = Task { try await Self.listenerLatency(http, writeTo: leaderURL, listenOn: followerURL, seconds: probeSeconds) }
        let ember = try await bench.load(http, name: "ember (3 nodes)") { worker, i in
            var r = HTTPClientRequest(url: "\(nodeURLs[worker % nodeURLs.count])/bench/w\(worker)/\(benchKey(i, inserts: false)).json?print=silent")
            r.method = .PUT
            r.body = .bytes(ByteBuffer(string: "\"\(benchValue(i, size: valueSize))\""))
            return r
        }
        ember.print()
        let lat = try await probe.value
        print(String(format: "ember write (leader) → SSE event (follower) under that load: %d probes, p50 %.2f ms, p99 %.2f ms",
                     lat.count, Self.pct(lat, 0.5), Self.pct(lat, 0.99)))
        for p in processes where p.isRunning { p.terminate() }
        guard !skipEtcd else { return }

        let etcdBase = base + 100
        let cluster = (0..<Self.nodes).map { "e\($0 + 1)=http://127.0.0.1:\(etcdBase + 10 + $0)" }.joined(separator: ",")
        var etcdURLs: [String] = []
        for i in 0..<Self.nodes {
            let client = "http://127.0.0.1:\(etcdBase + i)", peer = "http://127.0.0.1:\(etcdBase + 10 + i)"
            processes.append(try HTTPLoad.launch(etcd, [
                "--data-dir", "\(dir)/etcd\(i + 1)", "--name", "e\(i + 1)",
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", cluster, "--initial-cluster-state", "new", "--log-level", "error",
            ]))
            etcdURLs.append(client)
        }
        for url in etcdURLs { try await HTTPLoad.waitReady(http, url + "/health") }
        let members = etcdURLs
        let etcdResult = try await bench.load(http, name: "etcd (3 members)") { worker, i in
            etcdPut(members[worker % members.count], key: "/bench/w\(worker)/\(benchKey(i, inserts: false))",
                    value: "\"" + benchValue(i, size: valueSize) + "\"")
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

    /// Probe writes between listener-latency samples.
    static let probeMillis = 50

    static func pct(_ sorted: [Double], _ p: Double) -> Double {
        sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
    }

    static func micros() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1_000
    }

    /// The leader's URL and one follower's.
    func roles(_ http: HTTPClient, _ urls: [String]) async throws -> (String, String) {
        var leader: String?, follower: String?
        for url in urls {
            let r = try await http.execute(HTTPClientRequest(url: url + "/.ember/status"), timeout: .seconds(2))
            let body = try await r.body.collect(upTo: 1 << 20)
            let role = (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any])?["role"] as? String
            if role == "leader" { leader = url } else { follower = url }
        }
        guard let leader, let follower else { throw ValidationError("no leader/follower pair") }
        return (leader, follower)
    }

    /// Sorted write→event latencies (ms) of probes written at `writeTo` and seen on `listenOn`.
    static func listenerLatency(_ http: HTTPClient, writeTo: String, listenOn: String, seconds: Double) async throws -> [Double] {
        var request = HTTPClientRequest(url: listenOn + "/probe.json")
        request.headers.add(name: "Accept", value: "text/event-stream")
        let stream = try await http.execute(request, timeout: .seconds(Int64(seconds) + 30))
        let writer = Task {
            let end = ContinuousClock.now + .seconds(seconds)
            var i = 0
            while ContinuousClock.now < end {
                var put = HTTPClientRequest(url: "\(writeTo)/probe/p\(i % 100).json?print=silent")
                put.method = .PUT
                put.body = .bytes(ByteBuffer(string: "\(Self.micros())"))
                if let r = try? await http.execute(put, timeout: .seconds(10)) { _ = try? await r.body.collect(upTo: 1 << 16) }
                i += 1
                try await Task.sleep(for: .milliseconds(Self.probeMillis))
            }
            // Ends the reader (the stream is otherwise quiet until its next keep-alive).
            var stop = HTTPClientRequest(url: "\(writeTo)/probe/stop.json?print=silent")
            stop.method = .PUT
            stop.body = .bytes(ByteBuffer(string: "0"))
            _ = try? await http.execute(stop, timeout: .seconds(10))
        }
        var samples: [Double] = []
        var pending = ""
        reading: for try await chunk in stream.body {
            let now = Self.micros()
            pending += String(buffer: chunk)
            while let nl = pending.firstIndex(of: "\n") {
                let line = pending[..<nl]
                pending = String(pending[pending.index(after: nl)...])
                // `data: {"path":"/p7","data":1732260000000000}` (the initial put is the whole map)
                guard line.hasPrefix("data: "),
                      let obj = try? JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8)) as? [String: Any],
                      let path = obj["path"] as? String else { continue }
                if path == "/stop" { break reading }
                guard path.hasPrefix("/p"), let sent = (obj["data"] as? NSNumber)?.int64Value else { continue }
                samples.append(Double(now - sent) / 1000)
            }
        }
        writer.cancel()
        return samples.sorted()
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
