// ember-bench: the load generator and the side-by-side etcd benchmarks (BENCHMARKS.md).
// Must not: run inside the test suite (figures come from benchmark runs, never from tests) or
// link the node's fronts: it starts emberd and etcd as processes and loads them over the
// network (only `storage` runs EmberStorage in process).

import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix

@main
struct EmberBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ember-bench", abstract: "Ember benchmarks.",
        subcommands: [WriteBench.self, RealtimeBench.self, ClusterBench.self, LearnerBench.self, StorageBench.self, PITRBench.self, PITRWindowBench.self, TriggerBench.self, RealtimeListenersChild.self, HTTPLoadCheck.self], defaultSubcommand: WriteBench.self)
}

/// The load shape and binaries every write benchmark shares (`write`, `cluster`).
struct LoadOptions: ParsableArguments {
    @Option(help: "emberd binary to start (by `write` when --url is absent).")
    var emberd = ".build/release/emberd"

    @Option(help: "etcd binary (Debian etcd-server; scripts/bootstrap.sh --with-etcd).")
    var etcd = "/usr/bin/etcd"

    @Option(help: "Concurrent clients.")
    var clients = 64

    @Option(help: "Seconds per run (after a 1 s warm-up).")
    var duration = 10.0

    @Option(help: "Value size in bytes.")
    var valueSize = 16

    @Flag(help: "Every write creates a new key, in increasing key order (as pushes do); default: each client rewrites 1,000 keys in turn.")
    var inserts = false
}

/// Load generator: N concurrent clients of small durable writes against an Ember node, and the
/// same workload against a single-member etcd (Debian's etcd-server) in the same invocation.
struct WriteBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "write", abstract: "Durable small-write throughput and latency, Ember vs etcd (the default).")

    enum WireProtocol: String, ExpressibleByArgument, CaseIterable {
        case rest, ws
    }

    @OptionGroup var load: LoadOptions

    @Option(help: "Ember node URL; when absent a fresh emberd is started (see --emberd).")
    var url: String?

    @Option(help: "rest: HTTP/1.1 PUT per write; ws: Firebase wire protocol v5 `p` requests over WebSocket.")
    var `protocol`: WireProtocol = .rest

    @Option(help: "ws: requests each connection keeps outstanding (1 = wait for each ack).")
    var pipeline = 1

    @Option(help: "Rules file for the emberd the bench starts (measures writes judged by rules).")
    var rules: String?

    @Option(help: "Token sent with every write (?auth=), e.g. an unsigned JWT in protected mode.")
    var auth: String?

    @Option(help: "Leaves written under /other before the run (data that whole-tree rule reads would pay for).")
    var prefill = 0

    @Flag(help: "Also run the workload against a single-member etcd and print Ember/etcd.")
    var compareEtcd = false

    @Option(help: "Port of the emberd the bench starts (0: a random one in 19000-19999).")
    var port = 0

    var clients: Int { load.clients }
    var duration: Double { load.duration }
    var valueSize: Int { load.valueSize }
    var inserts: Bool { load.inserts }
    var emberd: String { load.emberd }
    var etcd: String { load.etcd }
    var driver: HTTPLoad { HTTPLoad(clients: clients, duration: duration) }

    func validate() throws {
        guard pipeline >= 1 else { throw ValidationError("--pipeline must be at least 1") }
        guard `protocol` == .ws || pipeline == 1 else { throw ValidationError("--pipeline needs --protocol ws") }
        guard `protocol` == .rest || auth == nil else { throw ValidationError("--auth is for --protocol rest") }
    }

    func run() async throws {
        let http = driver.makeClient()
        do { try await runAll(http) } catch {
            try? await http.shutdown()
            throw error
        }
        try await http.shutdown()
    }

    func runAll(_ http: HTTPClient) async throws {
        let valueSize = valueSize  // captured by the load closures

        var emberProcess: Process?
        let base: String
        if let url { base = url } else {
            let port = self.port > 0 ? self.port : 19_000 + Int.random(in: 0..<1000)
            let dir = NSTemporaryDirectory() + "ember-bench-\(UUID().uuidString)"
            emberProcess = try HTTPLoad.launch(emberd, ["--data", dir, "--port", "\(port)", "--log-level", "warning",
                                                        // One machine plays many clients: per-client limits off.
                                                        "--max-connections-per-address", "0", "--max-requests-per-second", "0"]
                                               + (rules.map { ["--rules", $0] } ?? []))
            base = "http://127.0.0.1:\(port)"
            try await HTTPLoad.waitReady(http, base + "/.json?auth=owner")
        }
        defer { emberProcess?.terminate() }
        if prefill > 0 {
            var r = HTTPClientRequest(url: "\(base)/other.json?print=silent&auth=owner")
            r.method = .PUT
            r.body = .bytes(ByteBuffer(string: "{" + (0..<prefill).map { "\"n\($0)\": \"\(benchValue($0, size: valueSize))\"" }.joined(separator: ",") + "}"))
            _ = try await http.execute(r, timeout: .seconds(120))
        }
        let authParam = auth.map { "&auth=\($0)" } ?? ""
        let shape = `protocol` == .ws
            ? "\(clients) WebSocket connections (wire protocol v5) x \(pipeline) outstanding `p` requests each"
            : "\(clients) HTTP/1.1 clients (one PUT per request)"
        print("ember-bench: \(shape), \(inserts ? "a new key per write (increasing)" : "1,000 keys per client rewritten"), "
              + "\(valueSize)-byte values, \(duration) s per run, load average \(loadAverage())"
              + (rules.map { ", rules \($0)" } ?? "") + (prefill > 0 ? ", \(prefill) other leaves" : ""))
        let cpu0 = emberProcess.map { processCPUSeconds($0.processIdentifier) } ?? 0
        let own0 = processCPUSeconds(getpid()), machine0 = MachineCPU.now()
        let ember: HTTPLoad.Result
        switch `protocol` {
        case .rest:
            ember = try await RawHTTPLoad(bases: [base], clients: clients, duration: duration).run(name: "ember") { worker, i in
                RawHTTPRequest(method: "PUT", target: "/bench/w\(worker)/\(benchKey(i, inserts: inserts)).json?print=silent\(authParam)",
                               body: "\"\(benchValue(i, size: valueSize))\"")
            }
        case .ws:
            let ws = base.replacingOccurrences(of: "http://", with: "ws://")
            ember = try await WireWriteLoad(url: ws + "/.ws?v=5&ns=bench", connections: clients, pipeline: pipeline,
                                            duration: duration, valueSize: valueSize, inserts: inserts).run(name: "ember")
        }
        ember.print()
        if let p = emberProcess {
            let cpu = processCPUSeconds(p.processIdentifier) - cpu0
            print(String(format: "emberd CPU %.2f s over the run = %.1f µs per acknowledged write (%d incl. warm-up); load average %@",
                         cpu, cpu * 1e6 / Double(max(1, ember.total)), ember.total, loadAverage()))
        }
        // Everything shares the machine's cores: say how busy they were and what the load
        // generator itself cost, so a CPU-bound run is recognisable as one.
        let own = processCPUSeconds(getpid()) - own0
        let machine = MachineCPU.now().busy(since: machine0)
        print(String(format: "load generator CPU %.1f µs per write; machine CPU busy %.0f%% of %d cores over the run",
                     own * 1e6 / Double(max(1, ember.total)), machine * 100, MachineCPU.cores))
        guard compareEtcd else { return }
        let etcdPort = 22_379 + Int.random(in: 0..<1000)
        let dir = NSTemporaryDirectory() + "etcd-bench-\(UUID().uuidString)"
        let etcdProcess = try HTTPLoad.launch(etcd, [
            "--data-dir", dir, "--name", "bench",
            "--listen-client-urls", "http://127.0.0.1:\(etcdPort)", "--advertise-client-urls", "http://127.0.0.1:\(etcdPort)",
            "--listen-peer-urls", "http://127.0.0.1:\(etcdPort + 1)", "--initial-advertise-peer-urls", "http://127.0.0.1:\(etcdPort + 1)",
            "--initial-cluster", "bench=http://127.0.0.1:\(etcdPort + 1)", "--log-level", "error",
        ])
        defer { etcdProcess.terminate() }
        try await HTTPLoad.waitReady(http, "http://127.0.0.1:\(etcdPort)/health")
        // etcd's HTTP gateway answers one request per connection at a time (no pipelining over
        // HTTP/1.1): against pipelined Ember it gets as many concurrent clients as Ember has
        // writes outstanding (connections x pipeline).
        let etcdClients = `protocol` == .ws ? clients * pipeline : clients
        if `protocol` == .ws {
            print("etcd: \(etcdClients) HTTP/1.1 clients (= \(clients) x \(pipeline) outstanding writes), one POST /v3/kv/put per request")
        }
        let etcdCPU0 = processCPUSeconds(etcdProcess.processIdentifier)
        let etcdResult = try await RawHTTPLoad(bases: ["http://127.0.0.1:\(etcdPort)"], clients: etcdClients, duration: duration)
            .run(name: "etcd") { worker, i in
                etcdPutRequest(key: "/bench/w\(worker % clients)/\(benchKey(i * pipeline + worker / clients, inserts: inserts))",
                               value: "\"" + benchValue(i, size: valueSize) + "\"")
            }
        etcdResult.print()
        let etcdCPU = processCPUSeconds(etcdProcess.processIdentifier) - etcdCPU0
        print(String(format: "etcd CPU %.2f s over the run = %.1f µs per acknowledged write; load average %@",
                     etcdCPU, etcdCPU * 1e6 / Double(max(1, etcdResult.total)), loadAverage()))
        print(String(format: "ratio ember/etcd: throughput %.2fx, p50 latency %.2fx, p99 latency %.2fx",
                     ember.rate / etcdResult.rate, ember.p50 / etcdResult.p50, ember.p99 / etcdResult.p99))
    }
}

/// CPU seconds (user + system) process `pid` has used so far (from /proc).
/// Aggregate CPU time of the machine from /proc/stat (jiffies): busy and total.
struct MachineCPU {
    var busy: Double = 0
    var total: Double = 0
    /// Time the hypervisor ran someone else while this VM wanted a core (`steal`, the 8th field):
    /// counted in `busy`, so a bench's CPU figures drift with it.
    var steal: Double = 0
    static let cores = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))

    static func now() -> MachineCPU {
        guard let s = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let line = s.split(separator: "\n").first, line.hasPrefix("cpu ") else { return MachineCPU() }
        let f = line.split(separator: " ").dropFirst().compactMap { Double($0) }
        guard f.count >= 5 else { return MachineCPU() }
        let idle = f[3] + f[4]  // idle + iowait
        let total = f.prefix(8).reduce(0, +)
        return MachineCPU(busy: total - idle, total: total, steal: f.count >= 8 ? f[7] : 0)
    }

    /// Fraction of all cores busy since `earlier`.
    func busy(since earlier: MachineCPU) -> Double {
        let t = total - earlier.total
        return t > 0 ? (busy - earlier.busy) / t : 0
    }

    /// Fraction of all cores' time stolen by the host since `earlier`.
    func steal(since earlier: MachineCPU) -> Double {
        let t = total - earlier.total
        return t > 0 ? (steal - earlier.steal) / t : 0
    }
}

/// The median of `xs` (0 when empty): the figure of repeated runs a drifting, shared machine
/// distorts least.
func median(_ xs: [Double]) -> Double {
    let s = xs.sorted()
    guard !s.isEmpty else { return 0 }
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

/// etcd's HTTP gateway put of `key` = `value` (both base64 in its JSON body).
func etcdPut(_ base: String, key: String, value: String) -> HTTPClientRequest {
    var r = HTTPClientRequest(url: base + "/v3/kv/put")
    r.method = .POST
    r.body = .bytes(ByteBuffer(string: etcdPutRequest(key: key, value: value).body))
    return r
}

/// The same put for `RawHTTPLoad`.
func etcdPutRequest(key: String, value: String) -> RawHTTPRequest {
    let k = Data(key.utf8).base64EncodedString(), v = Data(value.utf8).base64EncodedString()
    return RawHTTPRequest(method: "POST", target: "/v3/kv/put", body: #"{"key":"\#(k)","value":"\#(v)"}"#)
}

func processCPUSeconds(_ pid: Int32) -> Double {
    guard let s = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = s.lastIndex(of: ")") else { return 0 }
    let f = s[s.index(after: close)...].split(separator: " ")  // f[0] = state (field 3)
    guard f.count > 13, let u = Double(f[11]), let k = Double(f[12]) else { return 0 }
    return (u + k) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// What the HTTP loads share: the AsyncHTTPClient for setup calls (readiness, status, prefill,
/// probes; the measured loads use `RawHTTPLoad`), a load's result, and starting a server.
struct HTTPLoad: Sendable {
    var clients: Int
    var duration: Double

    func makeClient() -> HTTPClient {
        HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: .init(connectionPool: .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: clients)))
    }

    struct Result {
        var name: String
        /// Writes measured (sent after the warm-up, answered before the end).
        var count: Int
        var errors: Int
        var seconds: Double
        var p50: Double
        var p99: Double
        /// Every write answered successfully, warm-up included (for CPU per write).
        var total: Int
        var rate: Double { Double(count) / seconds }

        /// `unit`: what a request is (the learners' readers print "reads").
        func print(unit: String = "writes") {
            Swift.print(String(format: "%@: %d %@ in %.1f s = %.0f %@/s, p50 %.2f ms, p99 %.2f ms, %d errors",
                               name, count, unit, seconds, rate, unit, p50, p99, errors))
        }
    }

    static func launch(_ path: String, _ args: [String]) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        return p
    }

    static func waitReady(_ http: HTTPClient, _ url: String) async throws {
        for _ in 0..<300 {
            if let r = try? await http.execute(HTTPClientRequest(url: url), timeout: .seconds(1)), r.status == .ok { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ValidationError("\(url) did not become ready")
    }
}
