import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore

/// `ember-bench learners` (issue 38): every capacity figure the issue asks of learners in one
/// invocation, each printed with its goal and the load average, and repeated in a summary:
///
/// 1. writes: pipelined wire writes spread over 3 voters, on a fresh cluster with 0, 2 and 4
///    learners in turn (`--columns`): throughput, and commit latency p50 as one writer at the
///    leader sees it (one write outstanding: no queueing in the figure). Goals: with 2 learners
///    ≥ 90 % of the throughput without, commit p50 within 10 %.
/// 2. listeners: `--listeners` WebSocket listeners on one location spread over the 3 voters
///    alone, then (same cluster, 2 learners added) over 3 voters + 2 learners; one write at the
///    leader per round: write → every listener's event p50/p99 over all deliveries, the time
///    the last listener has it, each node's CPU per round. Goal: every write reaches every one.
/// 3. catch-up: `--children` children loaded into a fresh cluster, then a learner started from an
///    empty data directory and added: seconds until it has applied the leader's commit index
///    (goal < 30 s); then `--rate` writes/s at the leader, each timed to an SSE listener on that
///    learner (goal p99 < 10 ms, none later than 1 s).
///
/// The listeners are raw WebSocket connections in this process (`ConnectionSet`); its soft
/// open-file limit is raised to the hard one and checked against `--listeners` first.
struct LearnerBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "learners",
        abstract: "Learners (issue 38): writes with 0/2/4 learners, listeners over voters vs voters + learners, a learner's catch-up on a large dataset.")

    enum Phase: String, ExpressibleByArgument, CaseIterable {
        case writes, listeners, catchup
    }

    @Option(help: "emberd binary the bench starts.")
    var emberd = ".build/release/emberd"

    @Option(help: "openssl binary (the clusters' peer certificates).")
    var openssl = "/usr/bin/openssl"

    @Option(help: "Phases to run, comma-separated: writes, listeners, catchup (default: all three).")
    var phases = "writes,listeners,catchup"

    @Option(help: "writes: learner counts, one fresh cluster each, comma-separated (the first is the baseline; a count given more than once is compared by medians, e.g. 0,2,0,2,0,2).")
    var columns = "0,2,4"

    @Option(help: "writes: WebSocket connections spread over the 3 voters.")
    var clients = 24

    @Option(help: "writes: `p` requests each connection keeps outstanding.")
    var pipeline = 64

    @Option(help: "writes: seconds of pipelined writes per column (after a 1 s warm-up).")
    var duration = 8.0

    @Option(help: "writes: seconds of one-at-a-time writes at the leader per column (commit latency).")
    var commitSeconds = 4.0

    @Option(help: "writes: niceness the learners start with (0: an even share of the CPU; 19: the voters first, though the learners still take the idle time the voters leave while waiting on fsync and the network).")
    var learnerNice = 0

    @Option(help: "Extra emberd options every node of every phase starts with, separated by spaces given as --node-args=\"--learner-batch-ms 4 --learner-batch-entries 3\" (the = form: the value starts with dashes).")
    var nodeArgs = ""

    /// `nodeArgs` split into arguments.
    var nodeArgList: [String] { nodeArgs.split(separator: " ").map(String.init) }

    @Option(help: "listeners: WebSocket listeners, spread evenly over the nodes.")
    var listeners = 10_000

    @Option(help: "listeners: writes (rounds) per layout, each waited for at every listener.")
    var fanoutRounds = 20

    @Option(help: "listeners: connections handshaking at once while opening them.")
    var connectWindow = 200

    @Option(help: "catchup: children of the dataset the learner catches up on.")
    var children = 1_000_000

    @Option(help: "catchup: children per PATCH while loading the dataset.")
    var batch = 10_000

    @Option(help: "catchup: writes/s at the leader timed to the learner's listener.")
    var rate = 1_000

    @Option(help: "catchup: seconds of those writes.")
    var probeSeconds = 8.0

    static let throughputGoal = 0.90
    static let commitP50Tolerance = 0.10
    static let catchUpGoalSeconds = 30.0
    static let learnerP99GoalMillis = 10.0
    static let learnerMaxGoalMillis = 1_000.0
    /// Learners the listeners phase adds to the voters.
    static let listenerLearners = 2
    /// Descriptors kept free beside the listeners (HTTP clients, pipes, the binary's own files).
    static let spareDescriptors = 512
    /// How long one fan-out round may take before it counts as incomplete.
    static let roundLimitSeconds = 30.0
    static let maxListeners = 100_000
    static let maxChildren = 50_000_000

    var phaseList: [Phase] { phases.split(separator: ",").compactMap { Phase(rawValue: $0.trimmingCharacters(in: .whitespaces)) } }
    var columnList: [Int] { columns.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) } }

    func validate() throws {
        let named = phases.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard !named.isEmpty, named.allSatisfy({ Phase(rawValue: $0) != nil }) else {
            throw ValidationError("--phases takes writes, listeners, catchup separated by commas")
        }
        let cols = columns.split(separator: ",")
        guard !cols.isEmpty, cols.count == columnList.count,
              columnList.allSatisfy({ (0...LearnerCluster.maxLearners).contains($0) }) else {
            throw ValidationError("--columns takes learner counts 0...\(LearnerCluster.maxLearners) separated by commas")
        }
        guard clients >= 1, pipeline >= 1, duration > 0, commitSeconds > 0 else {
            throw ValidationError("--clients, --pipeline, --duration and --commit-seconds must be positive")
        }
        guard (0...19).contains(learnerNice) else { throw ValidationError("--learner-nice must be 0...19") }
        guard (1...Self.maxListeners).contains(listeners) else { throw ValidationError("--listeners must be 1...\(Self.maxListeners)") }
        guard fanoutRounds >= 1, connectWindow >= 1 else { throw ValidationError("--fanout-rounds and --connect-window must be positive") }
        guard (1...Self.maxChildren).contains(children), batch >= 1, batch <= children else {
            throw ValidationError("--children must be 1...\(Self.maxChildren) and --batch 1...children")
        }
        guard (1...100_000).contains(rate), probeSeconds > 0 else { throw ValidationError("--rate must be 1...100000, --probe-seconds positive") }
    }

    func run() async throws {
        let http = HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: .init(connectionPool: .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 16)))
        let report = Report()
        do {
            try await runAll(http, report)
        } catch {
            try? await http.shutdown()
            report.printSummary()
            throw error
        }
        try await http.shutdown()
        report.printSummary()
    }

    func runAll(_ http: HTTPClient, _ report: Report) async throws {
        let dir = NSTemporaryDirectory() + "ember-learner-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        print("ember-bench learners: emberd \(emberd)\(nodeArgs.isEmpty ? "" : " " + nodeArgs), phases \(phaseList.map(\.rawValue).joined(separator: ", ")), "
              + "\(MachineCPU.cores) cores, load average \(loadAverage())")
        for phase in phaseList {
            switch phase {
            case .writes: try await writesPhase(http, dir: dir, report)
            case .listeners: try await listenersPhase(http, dir: dir, report)
            case .catchup: try await catchUpPhase(http, dir: dir, report)
            }
        }
    }

    // MARK: - 1. writes with 0, 2, 4 learners

    struct WriteColumn {
        var learners: Int
        var rate: Double
        var ackP50: Double
        var ackP99: Double
        var commitP50: Double
        var commitP99: Double
    }

    func writesPhase(_ http: HTTPClient, dir: String, _ report: Report) async throws {
        print("-- writes: \(clients) WebSocket connections x \(pipeline) outstanding over the 3 voters, \(duration) s; "
              + "then one writer at the leader, one write outstanding, \(commitSeconds) s; a fresh cluster per column"
            + (learnerNice == 0 ? "" : "; learners at nice \(learnerNice) (the voters first)"))
        var done: [WriteColumn] = []
        for n in columnList {
            let c = try await LearnerCluster.start(http: http, emberd: emberd, openssl: openssl, parent: dir, nodeArgs: nodeArgList)
            defer { c.stop() }
            c.learnerNice = learnerNice
            for _ in 0..<n { try await c.addLearner() }
            let name = "3 voters + \(n) learners" + (learnerNice == 0 || n == 0 ? "" : " at nice \(learnerNice)")
            let intake = await LearnerIntake.snapshot(http, c)
            let cpu = CPUMeter(c.all)
            let load = try await WireWriteLoad(urls: c.voterWSURLs, connections: clients, pipeline: pipeline, duration: duration,
                                               valueSize: 16, inserts: false).run(name: name)
            _ = cpu.report(writes: load.total)
            await LearnerIntake.report(http, c, before: intake, seconds: duration + 1)
            // One write at a time: per-message costs (wake-ups, frames, transactions) are not
            // spread over batches, and what the learners spend competes with the commit's path.
            let oneCPU = CPUMeter(c.all)
            let one = try await WireWriteLoad(urls: [LearnerCluster.ws(c.leaderURL)], connections: 1, pipeline: 1,
                                              duration: commitSeconds, valueSize: 16, inserts: false).run(name: name + ", one writer")
            _ = oneCPU.report(writes: one.count)
            let col = WriteColumn(learners: n, rate: load.rate, ackP50: load.p50, ackP99: load.p99, commitP50: one.p50, commitP99: one.p99)
            done.append(col)
            report.line(String(format: "writes, %@: %.0f writes/s (pipelined, %d errors), ack p50 %.2f ms p99 %.2f ms; "
                               + "commit latency (one writer at the leader) p50 %.2f ms p99 %.2f ms (%d writes, %d errors)",
                               name, load.rate, load.errors, load.p50, load.p99, one.p50, one.p99, one.count, one.errors))
        }
        compare(done, report)
    }

    /// Each learner count against the baseline (the first column's count). A count given more
    /// than once (`--columns 0,2,0,2,0,2`: on a VM whose host steals CPU one run moves ±30 %)
    /// is compared by medians, with every column's ratio to the baseline run next to it.
    func compare(_ done: [WriteColumn], _ report: Report) {
        guard let baseCount = done.first?.learners else { return }
        let base = done.filter { $0.learners == baseCount }
        var counts: [Int] = []
        for c in done where c.learners != baseCount && !counts.contains(c.learners) { counts.append(c.learners) }
        for n in counts {
            let runs = done.filter { $0.learners == n }
            let share = median(runs.map(\.rate)) / max(median(base.map(\.rate)), 1e-9)
            let p50Change = median(runs.map(\.commitP50)) / max(median(base.map(\.commitP50)), 1e-9) - 1
            let goals = n == 2
                ? String(format: "throughput %.1f %% (goal >= %.0f %%: %@), commit p50 %+.1f %% (goal within %.0f %%: %@)",
                         share * 100, Self.throughputGoal * 100, share >= Self.throughputGoal ? "met" : "NOT met",
                         p50Change * 100, Self.commitP50Tolerance * 100, abs(p50Change) <= Self.commitP50Tolerance ? "met" : "NOT met")
                : String(format: "throughput %.1f %%, commit p50 %+.1f %% (no goal for %d learners)", share * 100, p50Change * 100, n)
            var how = ""
            var ratios: [Double] = []
            if runs.count > 1 || base.count > 1 {
                ratios = done.indices.filter { done[$0].learners == n }.compactMap { i -> Double? in
                    guard let j = Self.nearest(done, to: i, learners: baseCount) else { return nil }
                    return done[i].rate / max(done[j].rate, 1e-9)
                }
                how = " (medians of \(runs.count) and \(base.count) runs; each run against the baseline run beside it: "
                    + ratios.map { String(format: "%.1f", $0 * 100) }.joined(separator: ", ") + " %)"
            }
            report.line(String(format: "writes with %d learners vs %d: %@%@", n, baseCount, goals, how))
            // The runs beside each other, as pairs: on a machine whose speed drifts run to run
            // (the same column moves by more than the effect) the pairs' median and its
            // distribution-free interval say more than a ratio of medians (`PairedRatios`).
            if n == 2 && ratios.count >= 2 {
                let paired = PairedRatios(ratios)
                let (lo, hi, coverage) = paired.medianInterval
                report.line(String(format: "    paired, %d learners vs %d: median %.1f %% of the throughput (goal >= %.0f %%: %@); the median lies in %.1f–%.1f %% with %.0f %% confidence",
                                   n, baseCount, 100 * paired.median, Self.throughputGoal * 100,
                                   paired.verdict(maxLossPercent: 100 * (1 - Self.throughputGoal)), 100 * lo, 100 * hi, 100 * coverage))
            }
        }
    }

    /// The column with `learners` closest to column `i` (the earlier one on a tie).
    static func nearest(_ done: [WriteColumn], to i: Int, learners: Int) -> Int? {
        done.indices.filter { done[$0].learners == learners }.min { abs($0 - i) < abs($1 - i) || (abs($0 - i) == abs($1 - i) && $0 < $1) }
    }

    // MARK: - 3. a learner's catch-up on a large dataset, then its listener's latency

    func catchUpPhase(_ http: HTTPClient, dir: String, _ report: Report) async throws {
        print("-- catch-up: \(children) children loaded at the leader (\(batch) per PATCH), then a learner from an empty data directory")
        let c = try await LearnerCluster.start(http: http, emberd: emberd, openssl: openssl, parent: dir, nodeArgs: nodeArgList)
        defer { c.stop() }
        let t0 = ContinuousClock.now
        var next = 0
        while next < children {
            let end = min(children, next + batch)
            let body = "{" + (next..<end).map { #""\#(Self.childKey($0))":"\#(benchValue($0, size: 16))""# }.joined(separator: ",") + "}"
            try await c.leaderRequest("PATCH", "/big.json?ns=bench&print=silent", body: body)
            next = end
        }
        let leader = try await c.status(c.leaderURL)
        report.line(String(format: "dataset: %d children loaded in %.1f s; the leader's log: commit index %d, snapshot index %d",
                           children, (ContinuousClock.now - t0).seconds, leader["commitIndex"] as? Int ?? -1, leader["snapshotIndex"] as? Int ?? -1))
        let (learner, seconds) = try await c.addLearner()
        let st = try await c.status(learner.url)
        // The last child read back on the learner: it has the dataset, not only an index.
        let last = try await http.execute(
            HTTPClientRequest(url: learner.url + "/big/\(Self.childKey(children - 1)).json?ns=bench"), timeout: .seconds(30))
        let lastBody = String(buffer: try await last.body.collect(upTo: 1 << 16))
        let has = lastBody == "\"\(benchValue(children - 1, size: 16))\""
        report.line(String(format: "learner catch-up from an empty data directory, %d children: %.2f s to the leader's commit index "
                           + "(applied %d, snapshot index %d, last child %@); goal < %.0f s: %@",
                           children, seconds, st["appliedIndex"] as? Int ?? -1, st["snapshotIndex"] as? Int ?? -1,
                           has ? "read back" : "MISSING", Self.catchUpGoalSeconds,
                           seconds < Self.catchUpGoalSeconds && has ? "met" : "NOT met"))
        let lat = try await ClusterProbe.emberLatency(http, writeTo: c.leaderURL, listenOn: learner.url, rate: rate,
                                                      seconds: probeSeconds, maxInFlight: ClusterBench.maxRateInFlight)
        let expected = Int(Double(rate) * probeSeconds)
        let maxMs = lat.samples.last ?? 0
        report.line(String(format: "leader write → the caught-up learner's SSE listener at %d writes/s: %d of %d seen, p50 %.2f ms, "
                           + "p99 %.2f ms, max %.2f ms (%d write errors, %d sends late by > 1 ms); goal p99 < %.0f ms: %@, "
                           + "every event within %.0f s: %@",
                           rate, lat.samples.count, expected, lat.p50, lat.p99, maxMs, lat.errors, lat.lateSends,
                           Self.learnerP99GoalMillis, lat.p99 < Self.learnerP99GoalMillis ? "met" : "NOT met",
                           Self.learnerMaxGoalMillis / 1000,
                           maxMs < Self.learnerMaxGoalMillis && lat.samples.count >= lat.acknowledged ? "met" : "NOT met"))
    }

    static func childKey(_ i: Int) -> String { "u" + String(repeating: "0", count: max(0, 8 - String(i).count)) + String(i) }
}

/// The figure lines, printed as they come and again together at the end (what BENCHMARKS.md
/// takes), each with the load average at the time.
final class Report: @unchecked Sendable {
    private var lines: [String] = []

    func line(_ text: String) {
        let l = text + "; load average " + loadAverage()
        lines.append(l)
        print(l)
    }

    func printSummary() {
        guard !lines.isEmpty else { return }
        print("== ember-bench learners: summary")
        for l in lines { print("  " + l) }
    }
}
