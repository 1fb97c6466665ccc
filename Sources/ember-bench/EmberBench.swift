import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix

@main
struct EmberBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ember-bench", abstract: "Ember benchmarks.",
        subcommands: [WriteBench.self, RealtimeBench.self, ClusterBench.self], defaultSubcommand: WriteBench.self)
}

/// Load generator: N concurrent clients of small durable writes against an Ember node, and the
/// same workload against a single-member etcd (Debian's etcd-server) in the same invocation.
struct WriteBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "write", abstract: "Durable small-write throughput and latency, Ember vs etcd (the default).")

    @Option(help: "Ember node URL; when absent a fresh emberd is started (see --emberd).")
    var url: String?

    @Option(help: "emberd binary to start when --url is absent.")
    var emberd = ".build/release/emberd"

    @Option(help: "Concurrent clients.")
    var clients = 64

    @Option(help: "Seconds per run (after a 1 s warm-up).")
    var duration = 10.0

    @Option(help: "Value size in bytes.")
    var valueSize = 16

    @Option(help: "Rules file for the emberd the bench starts (measures writes judged by rules).")
    var rules: String?

    @Option(help: "Token sent with every write (?auth=), e.g. an unsigned JWT in protected mode.")
    var auth: String?

    @Option(help: "Leaves written under /other before the run (data that whole-tree rule reads would pay for).")
    var prefill = 0

    @Flag(help: "Also run the workload against a single-member etcd and print Ember/etcd.")
    var compareEtcd = false

    @Option(help: "etcd binary.")
    var etcd = "/usr/bin/etcd"

    func run() async throws {
        let http = makeClient()
        do { try await runAll(http) } catch {
            try? await http.shutdown()
            throw error
        }
        try await http.shutdown()
    }

    func makeClient() -> HTTPClient {
        HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: .init(connectionPool: .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: clients)))
    }

    func runAll(_ http: HTTPClient) async throws {
        let value = String(repeating: "x", count: valueSize)

        var emberProcess: Process?
        let base: String
        if let url { base = url } else {
            let port = 19_000 + Int.random(in: 0..<1000)
            let dir = NSTemporaryDirectory() + "ember-bench-\(UUID().uuidString)"
            emberProcess = try launch(emberd, ["--data", dir, "--port", "\(port)", "--log-level", "warning",
                                               // One machine plays many clients: per-client limits off.
                                               "--max-connections-per-address", "0", "--max-requests-per-second", "0"]
                                      + (rules.map { ["--rules", $0] } ?? []))
            base = "http://127.0.0.1:\(port)"
            try await waitReady(http, base + "/.json?auth=owner")
        }
        defer { emberProcess?.terminate() }
        if prefill > 0 {
            var r = HTTPClientRequest(url: "\(base)/other.json?print=silent&auth=owner")
            r.method = .PUT
            r.body = .bytes(ByteBuffer(string: "{" + (0..<prefill).map { "\"n\($0)\": \"\(value)\"" }.joined(separator: ",") + "}"))
            _ = try await http.execute(r, timeout: .seconds(120))
        }
        let authParam = auth.map { "&auth=\($0)" } ?? ""
        print("ember-bench: \(clients) clients, \(valueSize)-byte values, \(duration) s per run"
              + (rules.map { ", rules \($0)" } ?? "") + (prefill > 0 ? ", \(prefill) other leaves" : ""))
        let ember = try await load(http, name: "ember") { worker, i in
            var r = HTTPClientRequest(url: "\(base)/bench/w\(worker)/k\(i % 1000).json?print=silent\(authParam)")
            r.method = .PUT
            r.body = .bytes(ByteBuffer(string: "\"\(value)\""))
            return r
        }
        ember.print()
        guard compareEtcd else { return }
        let etcdPort = 22_379 + Int.random(in: 0..<1000)
        let dir = NSTemporaryDirectory() + "etcd-bench-\(UUID().uuidString)"
        let etcdProcess = try launch(etcd, [
            "--data-dir", dir, "--name", "bench",
            "--listen-client-urls", "http://127.0.0.1:\(etcdPort)", "--advertise-client-urls", "http://127.0.0.1:\(etcdPort)",
            "--listen-peer-urls", "http://127.0.0.1:\(etcdPort + 1)", "--initial-advertise-peer-urls", "http://127.0.0.1:\(etcdPort + 1)",
            "--initial-cluster", "bench=http://127.0.0.1:\(etcdPort + 1)", "--log-level", "error",
        ])
        defer { etcdProcess.terminate() }
        try await waitReady(http, "http://127.0.0.1:\(etcdPort)/health")
        let b64value = Data(("\"" + value + "\"").utf8).base64EncodedString()
        let etcdResult = try await load(http, name: "etcd") { worker, i in
            var r = HTTPClientRequest(url: "http://127.0.0.1:\(etcdPort)/v3/kv/put")
            r.method = .POST
            let key = Data("/bench/w\(worker)/k\(i % 1000)".utf8).base64EncodedString()
            r.body = .bytes(ByteBuffer(string: #"{"key":"\#(key)","value":"\#(b64value)"}"#))
            return r
        }
        etcdResult.print()
        print(String(format: "ratio ember/etcd: throughput %.2fx, p50 latency %.2fx, p99 latency %.2fx",
                     ember.rate / etcdResult.rate, ember.p50 / etcdResult.p50, ember.p99 / etcdResult.p99))
    }

    struct Result {
        var name: String
        var count: Int
        var errors: Int
        var seconds: Double
        var p50: Double
        var p99: Double
        var rate: Double { Double(count) / seconds }

        func print() {
            Swift.print(String(format: "%@: %d writes in %.1f s = %.0f writes/s, p50 %.2f ms, p99 %.2f ms, %d errors",
                               name, count, seconds, rate, p50, p99, errors))
        }
    }

    func load(_ http: HTTPClient, name: String,
              request: @escaping @Sendable (Int, Int) -> HTTPClientRequest) async throws -> Result {
        let warmup = 1.0
        let total = warmup + duration
        let start = ContinuousClock.now
        let measureFrom = start + .seconds(warmup)
        let end = start + .seconds(total)
        let perWorker = try await withThrowingTaskGroup(of: ([Double], Int).self) { group in
            for w in 0..<clients {
                group.addTask {
                    var lat: [Double] = []
                    var errors = 0
                    var i = 0
                    while ContinuousClock.now < end {
                        let t0 = ContinuousClock.now
                        do {
                            let resp = try await http.execute(request(w, i), timeout: .seconds(30))
                            _ = try await resp.body.collect(upTo: 1 << 20)
                            if !(200..<300).contains(Int(resp.status.code)) { errors += 1 }
                        } catch { errors += 1 }
                        let t1 = ContinuousClock.now
                        if t0 >= measureFrom && t1 <= end {
                            let d = t1 - t0
                            lat.append(Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15)
                        }
                        i += 1
                    }
                    return (lat, errors)
                }
            }
            var all: [([Double], Int)] = []
            for try await r in group { all.append(r) }
            return all
        }
        var lat = perWorker.flatMap(\.0)
        lat.sort()
        func pct(_ p: Double) -> Double { lat.isEmpty ? 0 : lat[min(lat.count - 1, Int(Double(lat.count) * p))] }
        return Result(name: name, count: lat.count, errors: perWorker.map(\.1).reduce(0, +),
                      seconds: duration, p50: pct(0.5), p99: pct(0.99))
    }

    func launch(_ path: String, _ args: [String]) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        return p
    }

    func waitReady(_ http: HTTPClient, _ url: String) async throws {
        for _ in 0..<300 {
            if let r = try? await http.execute(HTTPClientRequest(url: url), timeout: .seconds(1)), r.status == .ok { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ValidationError("\(url) did not become ready")
    }
}
