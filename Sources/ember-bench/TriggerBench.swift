import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore

/// `ember-bench triggers`: trigger delivery (issue 36) against a local receiver in this process
/// (`TriggerReceiver`), on a 3-node cluster (mutual TLS on loopback, writes at the leader) or one
/// node. Each run uses a namespace of its own (a rerun of the same keys would write identical
/// values, which the store skips, and fire nothing):
/// (a) open loop at `--rate` writes/s: commit → receiver latency per event, from the entry's
///     timestamp (`time`, ms) and from the write's send time (its value, µs) to the arrival;
/// (b) closed-loop writes as fast as the leader takes them with one batching trigger on every
///     write: writes/s, events/s delivered and the trigger's lag over the run, whether it grows;
///     then open-loop writes at `--sustained-rate` (the goal's 20,000 writes/s) with the same
///     trigger; then closed-loop writes with a trigger without batching: events/s. The lag is
///     sampled two ways: matching events committed (the trigger's `events`) minus events the
///     receiver got, and the log entries its replicated cursor has not passed (`pending`);
/// (c) the leader's write throughput in one run: no trigger, 1 trigger, `--triggers` triggers
///     on one pattern (every write matches all), no trigger with the writes spread over
///     `--triggers` top-level keys, as many triggers on as many patterns with the writes spread
///     over them (each write matches one), no trigger again (`--cases` picks and orders them);
///     each case against the mean of the runs without, the spread one also against the spread
///     run without.
struct TriggerBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "triggers", abstract: "Triggers: commit → receiver latency, sustained delivery with and without batching, write throughput with triggers.")

    @Option(help: "emberd binary to start.")
    var emberd = ".build/release/emberd"

    @Option(help: "openssl binary (the cluster's certificates).")
    var openssl = "/usr/bin/openssl"

    @Option(help: "3: a local cluster, writes at the leader; 1: a single node.")
    var nodes = 3

    @Option(help: "Open-loop writes/s of the latency run (a).")
    var rate = 1_000

    @Option(help: "Seconds per run (the closed-loop runs add a 1 s warm-up).")
    var duration = 10.0

    @Option(help: "WebSocket connections of the closed-loop runs (b, c).")
    var connections = 16

    @Option(help: "`p` requests each connection keeps outstanding (b, c).")
    var pipeline = 64

    @Option(help: "Value size in bytes (b, c).")
    var valueSize = 16

    @Option(help: "Open-loop writes/s of run (b)'s run at a fixed rate with the batching trigger (0: none).")
    var sustainedRate = 20_000

    @Option(help: "Events per POST of the batching triggers (b, c).")
    var batchSize = 1_000

    @Option(help: "The batching triggers' batchWindowMs (b, c): a partial batch waits this long for more events (0: as soon as no POST is in flight).")
    var batchWindowMs = 0

    @Option(help: "POSTs in flight per trigger, pipelined in order on one connection (the definitions' inFlight).")
    var inFlight = 16

    @Option(help: "Active triggers in the throughput comparison (c).")
    var triggers = 10

    @Option(help: "First of the nodes' ports (HTTP base…, peers base+5…); 0: free ports the kernel picks (other runs on the machine may hold any fixed range).")
    var portBase = 0

    @Option(help: "Which runs: any of a (latency), b (sustained, with and without batching), c (throughput with triggers), e.g. c to profile the leader during (c) alone.")
    var runs = "abc"

    @Option(help: "Which cases of (c), in their order: none (no trigger; first and last), one (1 trigger), paused (1 trigger, paused before the writes), same (--triggers on one pattern), spread-none (no trigger, the writes spread over --triggers top-level keys), spread (--triggers on as many patterns, the writes spread over them), e.g. spread to profile that case alone. Each case is compared with the mean of the no-trigger runs, a spread case also with spread-none.")
    var cases = "none,one,same,spread-none,spread,none"

    /// Named limits: open-loop sends in flight, and how long a run waits for delivery to finish.
    static let maxRateInFlight = 4_096
    /// Named limit: cases of (c) per run.
    static let maxCases = 16
    static let drainSeconds = 60.0
    /// How often the lag is sampled during a run.
    static let lagSampleMillis = 500

    func validate() throws {
        guard nodes == 1 || nodes == 3 else { throw ValidationError("--nodes must be 1 or 3") }
        guard (1...100_000).contains(rate) else { throw ValidationError("--rate must be 1...100000") }
        guard (0...100_000).contains(sustainedRate) else { throw ValidationError("--sustained-rate must be 0...100000") }
        guard duration > 0, connections >= 1, pipeline >= 1, valueSize >= 0 else {
            throw ValidationError("--duration, --connections and --pipeline must be positive")
        }
        guard (0...60_000).contains(batchWindowMs) else { throw ValidationError("--batch-window-ms must be 0...60000 (a trigger's limit)") }
        guard (1...1_000).contains(batchSize), (1...64).contains(inFlight) else {
            throw ValidationError("--batch-size must be 1...1000 and --in-flight 1...64 (a trigger's limits)")
        }
        guard portBase == 0 || (1_024...65_000).contains(portBase) else { throw ValidationError("--port-base must be 0 or 1024...65000") }
        guard (1...32).contains(triggers) else { throw ValidationError("--triggers must be 1...32 (a namespace's limit)") }
        guard !runs.isEmpty, runs.allSatisfy({ "abc".contains($0) }) else { throw ValidationError("--runs takes a, b and c (e.g. abc, c)") }
        let names = cases.split(separator: ",").map(String.init)
        guard !names.isEmpty, names.count <= Self.maxCases, names.allSatisfy({ ThroughputCase.kinds.contains($0) }) else {
            throw ValidationError("--cases takes at most \(Self.maxCases) of \(ThroughputCase.kinds.joined(separator: ", ")), comma-separated")
        }
    }

    func run() async throws {
        let http = HTTPLoad(clients: 8, duration: duration).makeClient()
        let processes = ProcessSet()
        let dir = NSTemporaryDirectory() + "ember-trigger-bench-\(UUID().uuidString)"
        do {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            try await runAll(http, processes, dir: dir)
        } catch {
            processes.stopAndWaitAll()
            try? FileManager.default.removeItem(atPath: dir)
            try? await http.shutdown()
            throw error
        }
        processes.stopAndWaitAll()
        try? FileManager.default.removeItem(atPath: dir)
        try await http.shutdown()
    }

    func runAll(_ http: HTTPClient, _ processes: ProcessSet, dir: String) async throws {
        let receiver = try TriggerReceiver()
        defer { receiver.stop() }
        let pids = PIDs()
        let leader = try await startNodes(http, processes, dir: dir, pids: pids)
        print("ember-bench triggers: \(nodes == 3 ? "3-node cluster, writes at the leader" : "one node"), receiver \(receiver.url("/hook")) "
              + "in the bench process; \(duration) s per run; load average \(loadAverage())")
        if runs.contains("a") { try await latencyRun(http, receiver, leader: leader) }
        if runs.contains("b") {
            try await sustainedRun(http, receiver, leader: leader, ns: "tbatch", batch: batchSize)
            if sustainedRate > 0 { try await fixedRateRun(http, receiver, leader: leader, ns: "trate", batch: batchSize) }
            try await sustainedRun(http, receiver, leader: leader, ns: "tsingle", batch: 1)
        }
        if runs.contains("c") {
            let followers = pids.byURL.filter { $0.key != leader }.sorted { $0.key < $1.key }.map(\.value)
            try await throughputRun(http, receiver, leader: leader, pids: (pids.byURL[leader] ?? 0, followers))
        }
        if receiver.malformed > 0 { print("  receiver: \(receiver.malformed) POSTs it could not read") }
        let sig = receiver.signatures
        print("  receiver: \(sig.verified) POSTs' signatures checked (every latency-probe POST, 1 in \(TriggerReceiver.verifyEvery) of the others), "
              + (sig.bad == 0 ? "all valid" : "\(sig.bad) WRONG"))
        print("load average \(loadAverage())")
    }

    // MARK: - Nodes

    /// The nodes' process ids by URL (the CPU per write of run (c)).
    final class PIDs: @unchecked Sendable {
        var byURL: [String: Int32] = [:]
    }

    /// Starts the node(s), notes their process ids, and returns the URL of the one that leads.
    func startNodes(_ http: HTTPClient, _ processes: ProcessSet, dir: String, pids: PIDs) async throws -> String {
        let limits = ["--log-level", "warning", "--max-connections-per-address", "0", "--max-requests-per-second", "0"]
        // Each node's HTTP port, then each one's peer port.
        let ports = portBase > 0 ? (0..<nodes).map { portBase + $0 } + (0..<nodes).map { portBase + 5 + $0 } : try Self.freePorts(2 * nodes)
        if nodes == 1 {
            let p = try HTTPLoad.launch(emberd, ["--data", "\(dir)/n1", "--port", "\(ports[0])"] + limits)
            processes.add(p)
            let url = "http://127.0.0.1:\(ports[0])"
            pids.byURL[url] = p.processIdentifier
            try await HTTPLoad.waitReady(http, url + "/.json?auth=owner")
            return url
        }
        let ids = (1...nodes).map { "n\($0)" }
        try makePeerCertificates(openssl: openssl, dir: dir, ids: ids)
        let peers = ids.enumerated().map { "\($1)=127.0.0.1:\(ports[nodes + $0])" }.joined(separator: ",")
        var urls: [String] = []
        for (i, id) in ids.enumerated() {
            let p = try HTTPLoad.launch(emberd, [
                "--data", "\(dir)/\(id)", "--port", "\(ports[i])", "--node-id", id, "--peers", peers,
                "--peer-tls-cert", "\(dir)/\(id).pem", "--peer-tls-key", "\(dir)/\(id).key", "--peer-tls-ca", "\(dir)/ca.pem",
            ] + limits)
            processes.add(p)
            urls.append("http://127.0.0.1:\(ports[i])")
            pids.byURL[urls[i]] = p.processIdentifier
        }
        for u in urls { try await HTTPLoad.waitReady(http, u + "/.json") }
        for _ in 0..<600 {
            for u in urls {
                if let s = try? await getJSON(http, u + "/.ember/status"), s["role"] as? String == "leader" { return u }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ValidationError("the cluster elected no leader")
    }

    /// `n` distinct ports free now: each bound at port 0 on 127.0.0.1 (all held until every
    /// one is picked, so none repeats), then closed for the nodes to bind.
    static func freePorts(_ n: Int) throws -> [Int] {
        var held: [(fd: Int32, port: Int)] = []
        defer { for h in held { close(h.fd) } }
        for _ in 0..<n { held.append(try TriggerReceiver.listen()) }
        return held.map(\.port)
    }

    // MARK: - Triggers over REST

    /// One trigger on `path` to the receiver, with `batch` events per POST; retention high
    /// enough that no run reaches it (a gap would end the measurement's meaning).
    /// A batching one (`batch` > 1) with `--batch-window-ms` when given.
    func definition(_ path: String, on: String, receiver: TriggerReceiver, batch: Int, urlPath: String = "/hook") -> [String: Any] {
        var d: [String: Any] = ["path": path, "on": [on], "url": receiver.url(urlPath), "secret": TriggerReceiver.secret,
                                "batchSize": batch, "inFlight": inFlight, "retries": 1_000, "backoffMs": 20, "maxBackoffMs": 1_000,
                                "retainEntries": 10_000_000, "retainBytes": 1 << 30]
        if batch > 1 && batchWindowMs > 0 { d["batchWindowMs"] = batchWindowMs }
        return d
    }

    func putTriggers(_ http: HTTPClient, _ leader: String, ns: String, _ triggers: [String: Any]) async throws {
        var r = HTTPClientRequest(url: "\(leader)/.settings/triggers.json?ns=\(ns)&auth=owner")
        r.method = .PUT
        r.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: triggers)))
        let resp = try await http.execute(r, timeout: .seconds(30))
        let body = try await resp.body.collect(upTo: 1 << 20)
        guard resp.status == .ok else { throw ValidationError("PUT triggers: \(resp.status) \(String(buffer: body))") }
        // The leader's worker starts a lane within its reconcile interval (500 ms).
        try await Task.sleep(for: .seconds(1))
    }

    /// `POST /.ember/triggers/NAME/pause` (or `resume`) in `ns`.
    func postTriggerAction(_ http: HTTPClient, _ leader: String, ns: String, _ name: String, _ action: String) async throws {
        var r = HTTPClientRequest(url: "\(leader)/.ember/triggers/\(name)/\(action)?ns=\(ns)&auth=owner")
        r.method = .POST
        let resp = try await http.execute(r, timeout: .seconds(30))
        let body = try await resp.body.collect(upTo: 1 << 20)
        guard resp.status == .ok else { throw ValidationError("POST \(action) \(name): \(resp.status) \(String(buffer: body))") }
    }

    /// Each trigger's replicated state in `ns` (`pending`: entries not yet delivered).
    func triggerStates(_ http: HTTPClient, _ leader: String, ns: String) async throws -> [String: [String: Any]] {
        // Shallow: the state alone (the lag), not every trigger's recent deliveries rendered on each poll.
        let o = try await getJSON(http, "\(leader)/.ember/triggers?ns=\(ns)&auth=owner&shallow=true")
        var out: [String: [String: Any]] = [:]
        for (name, t) in (o["triggers"] as? [String: Any]) ?? [:] {
            if let s = (t as? [String: Any])?["state"] as? [String: Any] { out[name] = s }
        }
        return out
    }

    func getJSON(_ http: HTTPClient, _ url: String) async throws -> [String: Any] {
        let resp = try await http.execute(HTTPClientRequest(url: url), timeout: .seconds(5))
        let body = try await resp.body.collect(upTo: 16 << 20)
        guard resp.status == .ok, let o = try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any] else {
            throw ValidationError("GET \(url): \(resp.status)")
        }
        return o
    }

    func pending(_ states: [String: [String: Any]]) -> Int {
        states.values.reduce(0) { $0 + (($1["pending"] as? NSNumber)?.intValue ?? 0) }
    }

    /// Matching events committed for the triggers since they were defined.
    func committed(_ states: [String: [String: Any]]) -> Int {
        states.values.reduce(0) { $0 + (($1["events"] as? NSNumber)?.intValue ?? 0) }
    }

    /// Until no trigger in `ns` has entries pending (or the drain limit): seconds it took, nil if never.
    func waitDelivered(_ http: HTTPClient, _ leader: String, ns: String) async throws -> Double? {
        let t0 = Date()
        while Date().timeIntervalSince(t0) < Self.drainSeconds {
            if pending(try await triggerStates(http, leader, ns: ns)) == 0 { return Date().timeIntervalSince(t0) }
            try await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    // MARK: - (a) latency

    func latencyRun(_ http: HTTPClient, _ receiver: TriggerReceiver, leader: String) async throws {
        let ns = "tlat", name = "lat"
        receiver.keepEvents(of: name)
        try await putTriggers(http, leader, ns: ns, [name: definition("/lat/{k}", on: "written", receiver: receiver, batch: 1)])
        let (rate, seconds) = (rate, duration)
        let w = try await RawProbe.onThread("trigger-latency-writer") {
            try RawProbe.openLoopWrites(url: leader, rate: rate, seconds: seconds, maxInFlight: Self.maxRateInFlight,
                                        request: { i, sent in
                                            RawHTTPRequest(method: "PUT", target: "/lat/p\(i % 1_000).json?ns=\(ns)&print=silent", body: "\(sent)")
                                        },
                                        stop: RawHTTPRequest(method: "PUT", target: "/latstop.json?ns=\(ns)&print=silent", body: "0"))
        }
        let drained = try await waitDelivered(http, leader, ns: ns)
        let events = receiver.events(name)
        var seen = Set<UInt64>(), commit: [Double] = [], sent: [Double] = []
        for e in events where seen.insert(e.index).inserted {
            commit.append(Double(e.arrivedMicros) / 1_000 - Double(e.timeMillis))
            if let a = e.after { sent.append(Double(e.arrivedMicros - a) / 1_000) }
        }
        commit.sort()
        sent.sort()
        print(String(format: "(a) latency, open loop %d writes/s for %.0f s: %d writes acknowledged (%d errors, %d sends late), "
                     + "%d events received (%d duplicates)%@; load average %@",
                     rate, seconds, w.acked, w.errors, w.late, seen.count, events.count - seen.count,
                     drained == nil ? ", NOT all delivered within \(Int(Self.drainSeconds)) s" : "", loadAverage()))
        print(String(format: "    commit (entry timestamp, ms resolution) → receiver: p50 %.2f ms, p99 %.2f ms, max %.2f ms (goal p50 < 5, p99 < 50); load average %@",
                     pct(commit, 0.5), pct(commit, 0.99), commit.last ?? 0, loadAverage()))
        print(String(format: "    write sent → receiver (includes the quorum write): p50 %.2f ms, p99 %.2f ms, max %.2f ms; load average %@",
                     pct(sent, 0.5), pct(sent, 0.99), sent.last ?? 0, loadAverage()))
        try await putTriggers(http, leader, ns: ns, [:])
    }

    func pct(_ sorted: [Double], _ p: Double) -> Double {
        sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
    }

    // MARK: - (b) sustained

    /// One look at the triggers during a run (`t`: seconds since the load started): log entries
    /// their replicated cursors have not passed, matching events committed for them, and
    /// events the receiver got (all from one GET and one read of the receiver's counts).
    struct LagSample {
        var t: Double
        var pending: Int
        var committed: Int
        var delivered: Int
        /// Committed matching events not yet received.
        var undelivered: Int { committed - delivered }
    }

    /// Samples the lag every `lagSampleMillis` from now until cancelled.
    func lagSampler(_ http: HTTPClient, _ receiver: TriggerReceiver, leader: String, ns: String, names: [String]) -> Task<[LagSample], Never> {
        let t0 = Date()
        return Task { () -> [LagSample] in
            var out: [LagSample] = []
            while !Task.isCancelled {
                // The receiver's count first, the leader's figures after: deliveries made while
                // the GET is answered count as not yet received (the lag is never understated,
                // nor negative).
                let delivered = names.reduce(0) { $0 + receiver.counts($1).events }
                if let states = try? await triggerStates(http, leader, ns: ns) {
                    out.append(LagSample(t: Date().timeIntervalSince(t0), pending: pending(states), committed: committed(states),
                                         delivered: delivered))
                }
                try? await Task.sleep(for: .milliseconds(Self.lagSampleMillis))
            }
            return out
        }
    }

    /// Closed-loop writes at the leader in `ns` (a new key per write: one `created` event each)
    /// while the lag is sampled; the load's result and the samples.
    func loadWithLag(_ http: HTTPClient, _ receiver: TriggerReceiver, leader: String, ns: String,
                     names: [String], name: String) async throws -> (HTTPLoad.Result, [LagSample]) {
        let ws = leader.replacingOccurrences(of: "http://", with: "ws://") + "/.ws?v=5&ns=\(ns)"
        let sampler = lagSampler(http, receiver, leader: leader, ns: ns, names: names)
        let result: HTTPLoad.Result
        do {
            result = try await WireWriteLoad(url: ws, connections: connections, pipeline: pipeline, duration: duration,
                                             valueSize: valueSize, inserts: true).run(name: name)
        } catch {
            sampler.cancel()
            throw error
        }
        sampler.cancel()
        return (result, await sampler.value)
    }

    /// The samples of the measured window: after the warm-up, through the run's end.
    func measured(_ samples: [LagSample], warmup: Double = RawHTTPLoad.warmup) -> [LagSample] {
        samples.filter { $0.t >= warmup && $0.t <= warmup + duration }
    }

    /// Events/s the receiver got over the measured window.
    func deliveredRate(_ samples: [LagSample], warmup: Double = RawHTTPLoad.warmup) -> Double {
        let window = measured(samples, warmup: warmup)
        guard let a = window.first, let b = window.last, b.t > a.t else { return 0 }
        return Double(b.delivered - a.delivered) / (b.t - a.t)
    }

    /// Matching events/s committed over the measured window (the writes the trigger matched,
    /// counted by the leader in the same samples as the deliveries).
    func committedRate(_ samples: [LagSample], warmup: Double = RawHTTPLoad.warmup) -> Double {
        let window = measured(samples, warmup: warmup)
        guard let a = window.first, let b = window.last, b.t > a.t else { return 0 }
        return Double(b.committed - a.committed) / (b.t - a.t)
    }

    /// The least-squares slope of `lag` over the measured window, per second.
    func trend(_ samples: [LagSample], warmup: Double = RawHTTPLoad.warmup, _ lag: (LagSample) -> Int) -> Double {
        let w = measured(samples, warmup: warmup)
        guard w.count >= 2 else { return 0 }
        let n = Double(w.count), mt = w.reduce(0) { $0 + $1.t } / n, mp = w.reduce(0) { $0 + Double(lag($1)) } / n
        let cov = w.reduce(0) { $0 + ($1.t - mt) * (Double(lag($1)) - mp) }
        let varT = w.reduce(0) { $0 + ($1.t - mt) * ($1.t - mt) }
        return varT > 0 ? cov / varT : 0
    }

    /// The lag line of a sustained run: both lags at the quarters of the measured window and
    /// their trends; growing when either trend exceeds 2 % of the matching write rate (the
    /// trigger falls behind for the whole run).
    func lagReport(_ samples: [LagSample], warmup: Double = RawHTTPLoad.warmup, rate: Double) -> (text: String, grows: Bool) {
        let quarters = [0.25, 0.5, 0.75, 1.0].map { q -> LagSample? in samples.last { $0.t <= warmup + duration * q } }
        let events = quarters.map { String($0?.undelivered ?? 0) }.joined(separator: ", ")
        let entries = quarters.map { String($0?.pending ?? 0) }.joined(separator: ", ")
        let (te, tp) = (trend(samples, warmup: warmup, \.undelivered), trend(samples, warmup: warmup, \.pending))
        let grows = te > 0.02 * rate || tp > 0.02 * rate
        let text = String(format: "events committed and not yet received at 1/4, 1/2, 3/4 and the end: %@ (trend %+.0f/s); "
                          + "entries the replicated cursor has not passed: %@ (trend %+.0f/s): %@",
                          events, te, entries, tp, grows ? "GROWS (delivery does not keep up)" : "steady (keeps up)")
        return (text, grows)
    }

    func sustainedRun(_ http: HTTPClient, _ receiver: TriggerReceiver, leader: String, ns: String, batch: Int) async throws {
        let name = batch > 1 ? "batched" : "single"
        try await putTriggers(http, leader, ns: ns, [name: definition("/bench/{w}/{k}", on: "created", receiver: receiver, batch: batch)])
        let before = receiver.counts(name)
        let (result, samples) = try await loadWithLag(http, receiver, leader: leader, ns: ns, names: [name],
                                                      name: "    writes, one trigger with batchSize \(batch)")
        result.print()
        print(String(format: "(b) batchSize %d, inFlight %d, closed loop: %.0f matching writes/s acknowledged, %.0f events/s committed "
                     + "and %.0f events/s delivered in the same samples; %@; load average %@",
                     batch, inFlight, result.rate, committedRate(samples), deliveredRate(samples),
                     lagReport(samples, rate: result.rate).text, loadAverage()))
        if batch > 1 {
            let drained = try await waitDelivered(http, leader, ns: ns)
            let got = receiver.counts(name).events - before.events
            print(String(format: "    after the load: %@; %d events received for %d writes acknowledged (goal: keeps up with ≥ 20,000 writes/s); load average %@",
                         drained.map { String(format: "the lag reached 0 in %.2f s", $0) } ?? "still behind after \(Int(Self.drainSeconds)) s",
                         got, result.total, loadAverage()))
        } else {
            // Each POST's cursor is a log entry the lane waits for: under the write load it queues
            // behind the writes. The backlog's delivery with no writes is the receiver-bound rate.
            let c0 = receiver.counts(name).events, t0 = Date()
            while Date().timeIntervalSince(t0) < duration, pending(try await triggerStates(http, leader, ns: ns)) > 0 {
                try await Task.sleep(for: .milliseconds(100))
            }
            let drainRate = Double(receiver.counts(name).events - c0) / max(Date().timeIntervalSince(t0), 1e-3)
            print(String(format: "    without batching: %.0f events/s to the local receiver during the writes, %.0f events/s delivering the backlog "
                         + "after them (goal ≥ 3,000); load average %@", deliveredRate(samples), drainRate, loadAverage()))
        }
        // Removed: its backlog is not delivered into the next run.
        try await putTriggers(http, leader, ns: ns, [:])
    }

    /// Open-loop REST writes at `--sustained-rate` (a new key each: one `created` event) with
    /// one batching trigger: the goal's "keeps up with ≥ 20,000 matching writes/s" as written.
    func fixedRateRun(_ http: HTTPClient, _ receiver: TriggerReceiver, leader: String, ns: String, batch: Int) async throws {
        let name = "rated"
        try await putTriggers(http, leader, ns: ns, [name: definition("/bench/{w}/{k}", on: "created", receiver: receiver, batch: batch)])
        let before = receiver.counts(name)
        let (rate, seconds) = (sustainedRate, duration + RawHTTPLoad.warmup)
        let sampler = lagSampler(http, receiver, leader: leader, ns: ns, names: [name])
        let w: (acked: Int, errors: Int, late: Int)
        do {
            w = try await RawProbe.onThread("trigger-rate-writer") {
                try RawProbe.openLoopWrites(url: leader, rate: rate, seconds: seconds, maxInFlight: Self.maxRateInFlight,
                                            request: { i, sent in
                                                RawHTTPRequest(method: "PUT", target: "/bench/w\(i % 16)/k\(i).json?ns=\(ns)&print=silent",
                                                               body: "\(sent)")
                                            },
                                            stop: RawHTTPRequest(method: "PUT", target: "/ratestop.json?ns=\(ns)&print=silent", body: "0"))
            }
        } catch {
            sampler.cancel()
            throw error
        }
        sampler.cancel()
        let samples = await sampler.value
        let lag = lagReport(samples, rate: Double(rate))
        print(String(format: "(b) batchSize %d, inFlight %d, open loop %d writes/s for %.0f s: %d writes acknowledged (%d errors, %d sends late > 1 ms); "
                     + "%.0f events/s committed and %.0f events/s delivered after the first second; %@; load average %@",
                     batch, inFlight, rate, seconds, w.acked, w.errors, w.late, committedRate(samples), deliveredRate(samples),
                     lag.text, loadAverage()))
        let drained = try await waitDelivered(http, leader, ns: ns)
        let got = receiver.counts(name).events - before.events
        print(String(format: "    after the load: %@; %d events received for %d writes acknowledged (goal: keeps up with ≥ 20,000 writes/s); load average %@",
                     drained.map { String(format: "the lag reached 0 in %.2f s", $0) } ?? "still behind after \(Int(Self.drainSeconds)) s",
                     got, w.acked, loadAverage()))
        try await putTriggers(http, leader, ns: ns, [:])
    }

    // MARK: - (c) throughput with triggers

    /// One write-throughput run of (c): the triggers defined for it and where the writes go.
    struct ThroughputCase {
        /// `--cases` name: none, one, same, spread-none or spread.
        var kind: String
        var label: String
        /// Trigger name → pattern (empty: no trigger).
        var triggers: [(name: String, pattern: String)]
        /// `WireWriteLoad.spread`: 0 writes below /bench; n spreads the writes over /p0 ... /p<n-1>.
        var spread: Int

        /// Its triggers are paused before the writes (their records pile up, none delivered).
        var paused = false

        static let kinds = ["none", "one", "same", "spread-none", "spread", "paused"]
    }

    /// The cases of (c) `--cases` names, in its order: no trigger, one, `--triggers` on one
    /// pattern (every write matches all of them), none with the writes spread over `--triggers`
    /// top-level keys, `--triggers` on as many patterns with the writes spread over them (each
    /// write matches one: /messages, /orders, ... each with its trigger), no trigger again. The
    /// spread writes alone cost more than those below one key (each connection's writes land on
    /// ten leaf pages, not one): the spread case's own baseline is spread-none.
    func throughputCases() -> [ThroughputCase] {
        let n = triggers
        return cases.split(separator: ",").map { kind in
            switch kind {
            case "one": return ThroughputCase(kind: "one", label: "1 trigger", triggers: [("t0", "/bench/{w}/{k}")], spread: 0)
            case "paused":
                return ThroughputCase(kind: "paused", label: "1 paused trigger", triggers: [("t0", "/bench/{w}/{k}")], spread: 0, paused: true)
            case "same":
                return ThroughputCase(kind: "same", label: "\(n) triggers on one pattern (each write matches all \(n))",
                                      triggers: (0..<n).map { ("t\($0)", "/bench/{w}/{k}") }, spread: 0)
            case "spread-none":
                return ThroughputCase(kind: "spread-none", label: "no trigger, writes spread over /p0 ... /p\(n - 1)", triggers: [], spread: n)
            case "spread":
                return ThroughputCase(kind: "spread", label: "\(n) triggers on \(n) patterns, writes spread over them (each write matches one)",
                                      triggers: (0..<n).map { ("t\($0)", "/p\($0)/{w}/{k}") }, spread: n)
            default: return ThroughputCase(kind: "none", label: "no trigger", triggers: [], spread: 0)
            }
        }
    }

    /// CPU seconds (user + system) of the leader, each follower and this process (the writers
    /// and the receiver) so far.
    func cpu(_ pids: (leader: Int32, followers: [Int32])) -> [Double] {
        [processCPUSeconds(pids.leader)] + pids.followers.map(processCPUSeconds) + [rusageCPUSeconds()]
    }

    /// POSTs/s and events per POST the receiver got, all lanes together and the least and most
    /// of one lane (the delivery's cost per POST against its cost per event).
    func postsLine(_ lanes: [(posts: Int, events: Int)], seconds: Double) -> String {
        let posts = lanes.reduce(0) { $0 + $1.posts }, events = lanes.reduce(0) { $0 + $1.events }
        let perPost = lanes.map { Double($0.events) / Double(max(1, $0.posts)) }
        let rates = lanes.map { Double($0.posts) / max(seconds, 1e-9) }
        return String(format: "receiver: %.0f POSTs/s (%d lanes, each %.0f–%.0f POSTs/s), %.1f events per POST (each lane %.1f–%.1f) during the load",
                      Double(posts) / max(seconds, 1e-9), lanes.count, rates.min() ?? 0, rates.max() ?? 0,
                      Double(events) / Double(max(1, posts)), perPost.min() ?? 0, perPost.max() ?? 0)
    }

    func throughputRun(_ http: HTTPClient, _ receiver: TriggerReceiver, leader: String,
                       pids: (leader: Int32, followers: [Int32])) async throws {
        var rates: [(kind: String, label: String, rate: Double, events: Double, cpu: [Double], load: String)] = []
        for (k, c) in throughputCases().enumerated() {
            let ns = "tput\(k)"
            let names = c.triggers.map(\.name)
            if !c.triggers.isEmpty {
                try await putTriggers(http, leader, ns: ns, Dictionary(uniqueKeysWithValues: c.triggers.map { t in
                    // Each its own receiver URL path, as production triggers have.
                    (t.name, definition(t.pattern, on: "created", receiver: receiver, batch: batchSize, urlPath: "/hook/\(t.name)") as Any)
                }))
            }
            for name in names where c.paused { try await postTriggerAction(http, leader, ns: ns, name, "pause") }
            let label = c.triggers.isEmpty ? c.label
                : "\(c.label), batchSize \(batchSize)" + (batchSize > 1 && batchWindowMs > 0 ? ", batchWindowMs \(batchWindowMs)" : "")
            let ws = leader.replacingOccurrences(of: "http://", with: "ws://") + "/.ws?v=5&ns=\(ns)"
            let sampler = lagSampler(http, receiver, leader: leader, ns: ns, names: names)
            let cpu0 = cpu(pids)
            let posts0 = names.map { receiver.counts($0) }, t0 = Date()
            let result: HTTPLoad.Result
            do {
                result = try await WireWriteLoad(url: ws, connections: connections, pipeline: pipeline, duration: duration,
                                                 valueSize: valueSize, inserts: true, spread: c.spread).run(name: "    writes, \(label)")
            } catch {
                sampler.cancel()
                throw error
            }
            // CPU per acknowledged write (warm-up included) over the load, delivery during it included.
            let perWrite = zip(cpu(pids), cpu0).map { ($0 - $1) * 1e6 / Double(max(1, result.total)) }
            let posts = zip(names.map { receiver.counts($0) }, posts0).map { (posts: $0.posts - $1.posts, events: $0.events - $1.events) }
            let seconds = Date().timeIntervalSince(t0)
            sampler.cancel()
            let samples = await sampler.value
            result.print()
            let load = loadAverage()
            let followers = perWrite.dropFirst().dropLast().map { String(format: "%.1f", $0) }.joined(separator: ", ")
            print(String(format: "    CPU per write: leader %.1f µs, followers %@ µs, the bench (writers and receiver) %.1f µs; load average %@",
                         perWrite[0], followers, perWrite[perWrite.count - 1], load))
            var events = 0.0
            if !c.triggers.isEmpty {
                events = deliveredRate(samples)
                print(String(format: "    %@: %.0f events/s delivered together during the run (%.2f per write), lag at the end %d entries; load average %@",
                             label, events, events / max(result.rate, 1e-9), samples.last?.pending ?? 0, load))
                print("    " + postsLine(posts, seconds: seconds) + "; load average \(load)")
                try await putTriggers(http, leader, ns: ns, [:])
            }
            rates.append((c.kind, c.label, result.rate, events, perWrite, load))
        }
        // CPU per write of all processes together (nodes and bench): what a write costs the machine.
        func total(_ cpu: [Double]) -> Double { cpu.reduce(0, +) }
        func baseline(_ kind: String) -> (rate: Double, cpu: Double)? {
            let runs = rates.filter { $0.kind == kind }
            guard !runs.isEmpty else { return nil }
            return (runs.map(\.rate).reduce(0, +) / Double(runs.count), runs.map { total($0.cpu) }.reduce(0, +) / Double(runs.count))
        }
        let plain = baseline("none"), spread = baseline("spread-none")
        if let plain {
            print(String(format: "(c) leader write throughput, same run: no trigger %@ writes/s (mean %.0f), %.1f µs CPU per write on the machine; load average %@",
                         rates.filter { $0.kind == "none" }.map { String(format: "%.0f", $0.rate) }.joined(separator: " and "),
                         plain.rate, plain.cpu, loadAverage()))
        }
        if let spread {
            print(String(format: "    no trigger, writes spread: %.0f writes/s, %.1f µs CPU per write on the machine%@; load average %@",
                         spread.rate, spread.cpu,
                         plain.map { String(format: " (%+.1f %% writes/s, %+.1f µs against no trigger below one key)", 100 * ($0.rate > 0 ? spread.rate / $0.rate - 1 : 0),
                                            spread.cpu - $0.cpu) } ?? "", loadAverage()))
        }
        for r in rates where r.kind != "none" && r.kind != "spread-none" {
            var line = String(format: "    %@: %.0f writes/s", r.label, r.rate)
            for (name, base) in [("without", plain), ("spread without", r.kind == "spread" ? spread : nil)] {
                guard let base else { continue }
                let less = 100 * (1 - r.rate / max(base.rate, 1e-9))
                line += String(format: ", %.1f %% less than %@: %@ (goal: within 15 %%), %+.1f µs CPU per write on the machine (%+.0f %%)",
                                less, name, less <= 15 ? "MEETS the goal" : "does NOT meet the goal", total(r.cpu) - base.cpu,
                                100 * (total(r.cpu) / max(base.cpu, 1e-9) - 1))
            }
            print(line + String(format: "; %.0f events/s delivered; %.1f µs CPU per write on the machine; load average %@", r.events, total(r.cpu), r.load))
        }
        pairedSummary(rates.map { (kind: $0.kind, rate: $0.rate, cpu: total($0.cpu)) })
    }

    /// Each run with triggers against the run of its baseline case just before it (`none`, or
    /// `spread-none` for `spread`), when the cases alternate (e.g. `spread-none,spread` three
    /// times): on this machine two runs of one case differ by as much as the effect measured
    /// (a cold first run, host steal), so the pairs' median and its distribution-free interval
    /// (`PairedRatios`) say more than a ratio to the mean of the baseline runs.
    func pairedSummary(_ runs: [(kind: String, rate: Double, cpu: Double)]) {
        for kind in ThroughputCase.kinds where kind != "none" && kind != "spread-none" {
            let baseKind = kind == "spread" ? "spread-none" : "none"
            var pairs: [(ratio: Double, cpu: Double)] = []
            for (i, r) in runs.enumerated() where r.kind == kind {
                guard let b = runs[..<i].last(where: { $0.kind == baseKind }) else { continue }
                pairs.append((r.rate / max(b.rate, 1e-9), r.cpu - b.cpu))
            }
            guard pairs.count >= 2 else { continue }
            let ratios = PairedRatios(pairs.map(\.ratio))
            let (lo, hi, coverage) = ratios.medianInterval
            let cpu = pairs.map(\.cpu).sorted()
            print(String(format: "(c) %@ against the %@ run before each, %d pairs: median %.1f %% less (goal: within 15 %%: %@); pairs %@; "
                         + "the median lies in %.1f–%.1f %% less with %.0f %% confidence; CPU per write on the machine %+.1f µs (median of the pairs); load average %@",
                         kind, baseKind, pairs.count, 100 * (1 - ratios.median), ratios.verdict(maxLossPercent: 15),
                         pairs.map { String(format: "%.1f", 100 * (1 - $0.ratio)) }.joined(separator: ", "),
                         100 * (1 - hi), 100 * (1 - lo), 100 * coverage, cpu[cpu.count / 2], loadAverage()))
        }
    }
}
