import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
#if canImport(Glibc)
import Glibc
#endif

/// Quorum-durable small writes against a 3-node Ember cluster (mutual TLS between peers) and a
/// 3-member etcd cluster, both on loopback, in one invocation; prints both and the ratio.
///
/// Modes (issue 12):
/// - closed loop over REST (default): N HTTP/1.1 clients, client w talking to node w mod 3 (or to
///   the leader only with `--leader-only`), so two thirds of the writes enter at a follower;
/// - closed loop over the wire protocol (`--protocol ws --pipeline K`): N WebSocket connections
///   spread the same way, each keeping K `p` requests outstanding; etcd gets N×K HTTP clients;
/// - open loop (`--rate R`): R writes/s at the leader, each carrying its send time, read back by a
///   listener on a follower (Ember: SSE; etcd: a watch), which reports write → follower event
///   latency at that fixed rate.
/// - `--learners N` (issue 38): N learners added to the voters; the probe's listener is on a
///   learner and `--learner-readers K` reads from them during the load (ClusterBench+Learners).
/// Every closed-loop run prints each server process's CPU per acknowledged write.
struct ClusterBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cluster", abstract: "3-node Ember vs 3-member etcd: quorum-durable writes/s, latency, CPU per write.")

    @OptionGroup var load: LoadOptions

    @Option(help: "rest: HTTP/1.1 PUT per write; ws: Firebase wire protocol v5 `p` requests over WebSocket.")
    var `protocol`: WriteBench.WireProtocol = .rest

    @Option(help: "ws: requests each connection keeps outstanding.")
    var pipeline = 1

    @Flag(help: "Every client writes to the leader (default: spread over all nodes).")
    var leaderOnly = false

    @Option(help: "Open-loop mode: this many writes/s at the leader, latency to a listener on a follower (no closed-loop load).")
    var rate: Int?

    @Option(help: "openssl binary (the cluster's certificates).")
    var openssl = "/usr/bin/openssl"

    @Flag(help: "Skip the etcd run.")
    var skipEtcd = false

    @Option(help: "Learners (non-voting members, 0...8) added to the 3 voters before the load: writes stay on the voters, the write → listener probe listens on a learner.")
    var learners = 0

    @Option(help: "With --learners: HTTP/1.1 clients reading one small value from the learners (spread over them) during the write load.")
    var learnerReaders = 0

    @Option(help: "Rounds of the same pair of runs (Ember and etcd in turn, the first alternating), then the medians.")
    var rounds = 1

    static let nodes = 3
    /// Most rounds one invocation runs (each is two clusters' start, load and stop).
    static let maxRounds = 20
    /// Open-loop sends allowed in flight before the run is declared saturated (bounds the tasks).
    static let maxRateInFlight = 4_096

    var clients: Int { load.clients }
    var duration: Double { load.duration }
    var valueSize: Int { load.valueSize }

    func validate() throws {
        guard pipeline >= 1 else { throw ValidationError("--pipeline must be at least 1") }
        guard `protocol` == .ws || pipeline == 1 else { throw ValidationError("--pipeline needs --protocol ws") }
        if let rate { guard rate >= 1 && rate <= 100_000 else { throw ValidationError("--rate must be 1...100000") } }
        guard (1...Self.maxRounds).contains(rounds) else { throw ValidationError("--rounds must be 1...\(Self.maxRounds)") }
        guard (0...Self.maxLearners).contains(learners) else { throw ValidationError("--learners must be 0...\(Self.maxLearners)") }
        guard (0...Self.maxLearnerReaders).contains(learnerReaders) else {
            throw ValidationError("--learner-readers must be 0...\(Self.maxLearnerReaders)")
        }
        guard learnerReaders == 0 || learners > 0 else { throw ValidationError("--learner-readers needs --learners") }
    }

    func run() async throws {
        let bench = HTTPLoad(clients: max(clients, 8), duration: load.duration)
        let http = bench.makeClient()
        let processes = ProcessSet()
        do {
            try await runAll(bench, http, processes)
        } catch {
            processes.stopAll()
            try? await http.shutdown()
            throw error
        }
        processes.stopAll()
        try await http.shutdown()
    }

    var shape: String {
        if let rate { return "open loop: \(rate) writes/s at the leader, a listener on a \(listenerName)" }
        let spread = leaderOnly ? "all on the leader" : "spread over the nodes"
        switch `protocol` {
        case .rest: return "\(clients) HTTP/1.1 clients \(spread)"
        case .ws: return "\(clients) WebSocket connections x \(pipeline) outstanding `p` requests, \(spread)"
        }
    }

    func runAll(_ bench: HTTPLoad, _ http: HTTPClient, _ processes: ProcessSet) async throws {
        let dir = NSTemporaryDirectory() + "ember-cluster-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        // Data of both clusters (each run leaves hundreds of MB otherwise).
        defer {
            processes.stopAndWaitAll()
            try? FileManager.default.removeItem(atPath: dir)
        }
        let ids = (1...Self.nodes).map { "n\($0)" }
        try makePeerCertificates(openssl: openssl, dir: dir, ids: ids + Self.learnerIDs(learners))
        print("ember-bench cluster: \(Self.nodes) nodes each" + (learners > 0 ? " (Ember: + \(learners) learners)" : "") + ", \(shape), \(load.valueSize)-byte values, \(duration) s per run"
              + (rounds == 1 ? "" : skipEtcd ? ", \(rounds) rounds" : ", \(rounds) rounds (Ember and etcd in turn, the first alternating)")
              + ", load average \(loadAverage())")
        var pairs: [(ember: RunFigures, etcd: RunFigures)] = []
        for round in 1...rounds {
            if rounds > 1 { print("-- round \(round) of \(rounds)") }
            // A drifting machine (a VM's speed moves between minutes) favours no peer on average.
            let emberFirst = round % 2 == 1 || skipEtcd
            var ember: RunFigures?, etcd: RunFigures?
            for peer in emberFirst ? [true, false] : [false, true] {
                if peer {
                    ember = try await emberRun(bench, http, processes, dir: "\(dir)/r\(round)", ids: ids, certs: dir)
                } else if !skipEtcd {
                    etcd = try await etcdRun(http, processes, dir: "\(dir)/r\(round)")
                }
            }
            try? FileManager.default.removeItem(atPath: "\(dir)/r\(round)")
            guard let ember, let etcd else { continue }
            print(String(format: "ratio ember/etcd: throughput %.2fx, p50 latency %.2fx, p99 latency %.2fx, CPU per write %.2fx",
                         ember.rate / etcd.rate, ember.p50 / etcd.p50, ember.p99 / etcd.p99,
                         ember.cpuRatio(to: etcd)))
            pairs.append((ember, etcd))
        }
        if pairs.count > 1 { printRounds(pairs) }
    }

    /// Medians (and ranges) over the rounds: each round's ratio comes from one pair of runs
    /// minutes apart at most, so the median ratio is the figure a drifting machine distorts least.
    func printRounds(_ pairs: [(ember: RunFigures, etcd: RunFigures)]) {
        func line(_ what: String, _ xs: [Double], _ format: String) -> String {
            String(format: "%@ median \(format) (\(format)–\(format))", what, median(xs), xs.min()!, xs.max()!)
        }
        print("over \(pairs.count) rounds:")
        if rate == nil {  // an open-loop run's rate is the one it was given
            print("  " + line("ember writes/s", pairs.map(\.ember.rate), "%.0f") + "; " + line("etcd writes/s", pairs.map(\.etcd.rate), "%.0f"))
        }
        print("  " + line("ember p50 ms", pairs.map(\.ember.p50), "%.2f") + "; " + line("etcd p50 ms", pairs.map(\.etcd.p50), "%.2f"))
        print("  " + line("ember p99 ms", pairs.map(\.ember.p99), "%.2f") + "; " + line("etcd p99 ms", pairs.map(\.etcd.p99), "%.2f"))
        print("  ratio ember/etcd: " + line("throughput", pairs.map { $0.ember.rate / $0.etcd.rate }, "%.2fx")
              + ", " + line("p50 latency", pairs.map { $0.ember.p50 / $0.etcd.p50 }, "%.2fx")
              + ", " + line("CPU per write", pairs.map { $0.ember.cpuRatio(to: $0.etcd) }, "%.2fx"))
    }

    /// Starts a fresh 3-node Ember cluster in `dir`, runs the mode's load on it, stops it.
    func emberRun(_ bench: HTTPLoad, _ http: HTTPClient, _ processes: ProcessSet, dir: String, ids: [String],
                  certs: String) async throws -> RunFigures {
        let base = 20_000 + Int.random(in: 0..<1000) * 10
        let peers = ids.enumerated().map { "\($1)=127.0.0.1:\(base + 5 + $0)" }.joined(separator: ",")
        var nodes: [ServerProcess] = []
        for (i, id) in ids.enumerated() {
            let port = base + i
            let p = try HTTPLoad.launch(load.emberd, [
                "--data", "\(dir)/\(id)", "--port", "\(port)", "--log-level", "warning", "--node-id", id, "--peers", peers,
                "--peer-tls-cert", "\(certs)/\(id).pem", "--peer-tls-key", "\(certs)/\(id).key", "--peer-tls-ca", "\(certs)/ca.pem",
                // One machine plays every client: per-address limits off.
                "--max-connections-per-address", "0", "--max-requests-per-second", "0",
            ])
            processes.add(p)
            nodes.append(ServerProcess(name: id, url: "http://127.0.0.1:\(port)", process: p))
        }
        defer { stop(nodes) }
        for n in nodes { try await HTTPLoad.waitReady(http, n.url + "/.json") }
        try await waitForLeader(http, nodes.map(\.url))
        let (leaderURL, followerURL) = try await roles(http, nodes.map(\.url))
        for i in nodes.indices where nodes[i].url == leaderURL { nodes[i].name += " (leader)" }
        let voterURLs = nodes.map(\.url)
        let learnerNodes = try await startLearners(http, processes, dir: dir, certs: certs, base: base, voterPeers: peers, leaderURL: leaderURL)
        nodes += learnerNodes
        // With learners the probe's listener is on one: write at the leader → event on a learner.
        let listenURL = learnerNodes.first?.url ?? followerURL
        if let rate {
            return try await rateRun(name: emberName, rate: rate, servers: nodes) {
                try await ClusterProbe.emberLatency(http, writeTo: leaderURL, listenOn: listenURL, rate: rate,
                                                     seconds: duration, maxInFlight: Self.maxRateInFlight)
            }
        }
        let targets = leaderOnly ? [leaderURL] : voterURLs
        let reads = try await learnerReads(http, learnerURLs: learnerNodes.map(\.url), leaderURL: leaderURL)
        let figures = try await closedLoopEmber(bench, http, targets: targets, leaderURL: leaderURL, followerURL: listenURL, servers: nodes)
        if let reads { try await reads.value.print(unit: "reads") }
        return figures
    }

    var emberName: String { learners == 0 ? "ember (3 nodes)" : "ember (3 voters + \(learners) learners)" }
    var listenerName: String { learners == 0 ? "follower" : "learner" }

    /// Starts a fresh 3-member etcd cluster in `dir`, runs the same load on it, stops it.
    func etcdRun(_ http: HTTPClient, _ processes: ProcessSet, dir: String) async throws -> RunFigures {
        let etcdBase = 20_000 + Int.random(in: 0..<1000) * 10 + 100
        let cluster = (0..<Self.nodes).map { "e\($0 + 1)=http://127.0.0.1:\(etcdBase + 10 + $0)" }.joined(separator: ",")
        var members: [ServerProcess] = []
        for i in 0..<Self.nodes {
            let client = "http://127.0.0.1:\(etcdBase + i)", peer = "http://127.0.0.1:\(etcdBase + 10 + i)"
            let p = try HTTPLoad.launch(load.etcd, [
                "--data-dir", "\(dir)/etcd\(i + 1)", "--name", "e\(i + 1)",
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", cluster, "--initial-cluster-state", "new", "--log-level", "error",
            ])
            processes.add(p)
            members.append(ServerProcess(name: "e\(i + 1)", url: client, process: p))
        }
        defer { stop(members) }
        for m in members { try await HTTPLoad.waitReady(http, m.url + "/health") }
        let etcdLeader = try await ClusterProbe.etcdLeader(http, members.map(\.url))
        for i in members.indices where members[i].url == etcdLeader { members[i].name += " (leader)" }
        if let rate {
            let follower = members.first { $0.url != etcdLeader }!.url
            return try await rateRun(name: "etcd (3 members)", rate: rate, servers: members) {
                try await ClusterProbe.etcdLatency(http, writeTo: etcdLeader, listenOn: follower, rate: rate,
                                                    seconds: duration, maxInFlight: Self.maxRateInFlight)
            }
        }
        return try await closedLoopEtcd(members: members, etcdLeader: etcdLeader)
    }

    /// Stops a run's servers and waits for them, so the next run has the machine (and ports) to itself.
    func stop(_ servers: [ServerProcess]) { ProcessSet.stopAndWait(servers.map(\.process)) }

    /// What a run reports for the ratio line.
    struct RunFigures {
        var rate: Double
        var p50: Double
        var p99: Double
        /// Server CPU µs per acknowledged write, all processes together.
        var cpuPerWrite: Double

        /// This run's CPU per write over `other`'s (guarded: a run may measure no CPU at all).
        func cpuRatio(to other: RunFigures) -> Double { cpuPerWrite / max(other.cpuPerWrite, 1e-9) }
    }

    func closedLoopEmber(_ bench: HTTPLoad, _ http: HTTPClient, targets: [String], leaderURL: String, followerURL: String,
                         servers: [ServerProcess]) async throws -> RunFigures {
        let valueSize = valueSize  // captured by the load closures
        // Write→listener latency on a follower under the load: a probe writes its send time at
        // the leader every `probeMillis`; an SSE stream on a follower reads it.
        let probe = Task {
            try await ClusterProbe.emberLatency(http, writeTo: leaderURL, listenOn: followerURL, rate: 1000 / Self.probeMillis,
                                                 seconds: duration + 1, maxInFlight: 64)
        }
        let cpu = CPUMeter(servers)
        let result: HTTPLoad.Result
        switch `protocol` {
        case .rest:
            // Connection w talks to targets[w % targets.count].
            result = try await RawHTTPLoad(bases: targets, clients: clients, duration: duration).run(name: emberName) { worker, i in
                RawHTTPRequest(method: "PUT", target: "/bench/w\(worker)/\(benchKey(i, inserts: false)).json?print=silent",
                               body: "\"\(benchValue(i, size: valueSize))\"")
            }
        case .ws:
            let urls = targets.map { $0.replacingOccurrences(of: "http://", with: "ws://") + "/.ws?v=5&ns=bench" }
            result = try await WireWriteLoad(urls: urls, connections: clients, pipeline: pipeline, duration: duration,
                                             valueSize: valueSize, inserts: load.inserts).run(name: emberName)
        }
        result.print()
        let perWrite = cpu.report(writes: result.total)
        let lat = try await probe.value
        print(String(format: "ember write (leader) → SSE event (%@) under that load: %d probes, p50 %.2f ms, p99 %.2f ms",
                     listenerName, lat.samples.count, lat.p50, lat.p99))
        return RunFigures(rate: result.rate, p50: result.p50, p99: result.p99, cpuPerWrite: perWrite)
    }

    func closedLoopEtcd(members: [ServerProcess], etcdLeader: String) async throws -> RunFigures {
        let valueSize = valueSize, clients = clients, pipeline = pipeline
        // etcd's HTTP gateway answers one request per connection at a time: against pipelined
        // Ember it gets as many concurrent clients as Ember has writes outstanding.
        let etcdClients = `protocol` == .ws ? clients * pipeline : clients
        if `protocol` == .ws {
            print("etcd: \(etcdClients) HTTP/1.1 clients (= \(clients) x \(pipeline) outstanding writes), one POST /v3/kv/put per request")
        }
        let targets = leaderOnly ? [etcdLeader] : members.map(\.url)
        let cpu = CPUMeter(members)
        let result = try await RawHTTPLoad(bases: targets, clients: etcdClients, duration: duration).run(name: "etcd (3 members)") { worker, i in
            etcdPutRequest(key: "/bench/w\(worker % clients)/\(benchKey(i * pipeline + worker / clients, inserts: false))",
                           value: "\"" + benchValue(i, size: valueSize) + "\"")
        }
        result.print()
        let perWrite = cpu.report(writes: result.total)
        return RunFigures(rate: result.rate, p50: result.p50, p99: result.p99, cpuPerWrite: perWrite)
    }

    /// An open-loop run: the probe at `rate`, server CPU over it.
    func rateRun(name: String, rate: Int, servers: [ServerProcess],
                 _ body: () async throws -> ClusterProbe.Latency) async throws -> RunFigures {
        let cpu = CPUMeter(servers)
        let lat = try await body()
        let expected = Int(Double(rate) * duration)
        print(String(format: "%@: %d of %d writes seen by the listener, write → event p50 %.2f ms, p99 %.2f ms, max %.2f ms; "
                     + "%d write errors, %d sends late by > 1 ms",
                     name, lat.samples.count, expected, lat.p50, lat.p99, lat.samples.last ?? 0, lat.errors, lat.lateSends))
        let perWrite = cpu.report(writes: lat.acknowledged)
        return RunFigures(rate: Double(lat.samples.count) / duration, p50: lat.p50, p99: lat.p99, cpuPerWrite: perWrite)
    }

    /// Probe writes between listener-latency samples during a closed-loop run.
    static let probeMillis = 50

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

/// A server process the bench started (an emberd node or an etcd member).
struct ServerProcess {
    var name: String
    let url: String
    let process: Process
}

/// Every process the bench started, stopped on the way out whatever happens.
final class ProcessSet: @unchecked Sendable {
    private var processes: [Process] = []
    func add(_ p: Process) { processes.append(p) }
    func stopAll() { for p in processes where p.isRunning { p.terminate() } }
    /// Stops every process and waits for each to exit (emberd and etcd exit on SIGTERM).
    func stopAndWaitAll() { Self.stopAndWait(processes) }

    /// Terminates `processes` (SIGTERM) and waits for each to exit.
    static func stopAndWait(_ processes: [Process]) {
        for p in processes where p.isRunning { p.terminate() }
        for p in processes { p.waitUntilExit() }
    }
}

/// CPU (user + system) each server process spends over a run, per acknowledged write.
struct CPUMeter {
    let servers: [ServerProcess]
    let start: [Double]
    let machine0 = MachineCPU.now()

    init(_ servers: [ServerProcess]) {
        self.servers = servers
        start = servers.map { processCPUSeconds($0.process.processIdentifier) }
    }

    /// Prints one line per process and the total; returns the total µs per write.
    func report(writes: Int) -> Double {
        let n = Double(max(1, writes))
        var parts: [String] = []
        var total = 0.0
        for (s, c0) in zip(servers, start) {
            let c = processCPUSeconds(s.process.processIdentifier) - c0
            total += c
            parts.append(String(format: "%@ %.1f µs", s.name, c * 1e6 / n))
        }
        print(String(format: "  server CPU per acknowledged write (%d incl. warm-up): %@; all together %.0f µs; machine %.0f%% busy; load average %@",
                     writes, parts.joined(separator: ", "), total * 1e6 / n,
                     MachineCPU.now().busy(since: machine0) * 100, loadAverage()))
        return total * 1e6 / n
    }
}
