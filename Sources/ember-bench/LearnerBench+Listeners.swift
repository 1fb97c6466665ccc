import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
#if canImport(Glibc)
import Glibc
#endif

/// `ember-bench learners`, phase 2: the same number of listeners served by the 3 voters alone,
/// then by 3 voters + 2 learners (the learners added to the same cluster in between).
extension LearnerBench {
    struct FanoutFigures {
        var opened: Int
        var complete: Int
        var deliveryP50: Double
        var deliveryP99: Double
        var lastP50: Double
        var lastP99: Double
        /// The busiest node's CPU per round, ms.
        var busiestCPU: Double
    }

    func listenersPhase(_ http: HTTPClient, dir: String, _ report: Report) async throws {
        raiseOpenFileLimit()
        let limit = openFileSoftLimit()
        guard listeners + Self.spareDescriptors <= limit else {
            throw ValidationError("--listeners \(listeners) needs \(listeners + Self.spareDescriptors) descriptors in this process; "
                                  + "its open-file limit is \(limit) (the hard limit, `ulimit -Hn`): lower --listeners")
        }
        print("-- listeners: \(listeners) WebSocket listeners on one location, spread evenly over the nodes; "
              + "\(fanoutRounds) writes at the leader each; this process's open-file limit \(limit)")
        let c = try await LearnerCluster.start(http: http, emberd: emberd, openssl: openssl, parent: dir, nodeArgs: nodeArgList)
        defer { c.stop() }
        let alone = try await fanout(c, http, report, layout: "3 voters alone")
        for _ in 0..<Self.listenerLearners { try await c.addLearner() }
        let with = try await fanout(c, http, report, layout: "3 voters + \(Self.listenerLearners) learners")
        report.line(String(format: "listeners, 3 voters alone vs + %d learners (%d listeners): write → event p99 %.2f vs %.2f ms, "
                           + "last listener p99 %.2f vs %.2f ms, busiest node's CPU per write %.1f vs %.1f ms (%d vs %d listeners each); "
                           + "goal (issue 38): every write reaches every listener: %@",
                           Self.listenerLearners, listeners, alone.deliveryP99, with.deliveryP99, alone.lastP99, with.lastP99,
                           alone.busiestCPU, with.busiestCPU, (listeners + 2) / 3, (listeners + 4) / 5,
                           with.complete == fanoutRounds && with.opened == listeners ? "met" : "NOT met"))
    }

    /// Opens `listeners` listeners spread over every node of `c`, writes `fanoutRounds` values at
    /// the leader one at a time (each waited for at every listener), closes them.
    func fanout(_ c: LearnerCluster, _ http: HTTPClient, _ report: Report, layout: String) async throws -> FanoutFigures {
        let nodes = c.all
        let stats = Stats()
        var sets: [ConnectionSet] = []
        var opened = 0
        let t0 = ContinuousClock.now
        for (k, node) in nodes.enumerated() {
            let share = listeners / nodes.count + (k < listeners % nodes.count ? 1 : 0)
            let set = ConnectionSet(url: LearnerCluster.ws(node.url), stats: stats)
            sets.append(set)
            opened += try await set.open(count: share, window: connectWindow) { _ in "lfan/v" }
        }
        print(String(format: "  %@: %d of %d listeners open in %.1f s", layout, opened, listeners, (ContinuousClock.now - t0).seconds))
        // Every delivery of a round's value counts from here (the value is its send time, µs).
        stats.lock.withLock { $0.latencyFrom = nowMicros() }
        let cpu0 = nodes.map { processCPUSeconds($0.process.processIdentifier) }
        var lasts: [Double] = []
        for round in 0..<fanoutRounds {
            let value = nowMicros()
            stats.lock.withLock { $0.round = (value: value, count: 0, last: 0) }
            try await c.leaderRequest("PUT", "/lfan/v.json?ns=bench&print=silent", body: "\(value)", timeout: .seconds(30))
            let deadline = ContinuousClock.now + .seconds(Self.roundLimitSeconds)
            var (got, last) = (0, 0)
            while ContinuousClock.now < deadline {
                (got, last) = stats.lock.withLock { ($0.round.count, $0.round.last) }
                if got >= opened { break }
                try await Task.sleep(for: .milliseconds(1))
            }
            if got >= opened {
                lasts.append(Double(last - value) / 1000)
            } else {
                print("  \(layout), round \(round + 1): \(got) of \(opened) listeners got the write within \(Int(Self.roundLimitSeconds)) s")
            }
            // Quiet between rounds: each round's figures are one write's alone.
            try await Task.sleep(for: .milliseconds(200))
        }
        let cpu = zip(nodes, cpu0).map { node, c0 in (node.name, (processCPUSeconds(node.process.processIdentifier) - c0) * 1000 / Double(fanoutRounds)) }
        for set in sets { await set.close() }
        var deliveries = stats.lock.withLock { $0.latencies }
        deliveries.sort()
        lasts.sort()
        func pct(_ xs: [Double], _ p: Double, scale: Double = 1) -> Double { xs.isEmpty ? 0 : xs[min(xs.count - 1, Int(Double(xs.count) * p))] * scale }
        let figures = FanoutFigures(opened: opened, complete: lasts.count,
                                    deliveryP50: pct(deliveries, 0.5, scale: 0.001), deliveryP99: pct(deliveries, 0.99, scale: 0.001),
                                    lastP50: pct(lasts, 0.5), lastP99: pct(lasts, 0.99), busiestCPU: cpu.map { $0.1 }.max() ?? 0)
        report.line(String(format: "listeners over %@: %d listeners (%@), %d of %d writes reached all of them; write → event p50 %.2f ms, "
                           + "p99 %.2f ms over %d deliveries; last listener p50 %.2f ms, p99 %.2f ms; CPU per write %@",
                           layout, opened, nodes.map { "\($0.name.split(separator: " ").first ?? "")" }.joined(separator: ", "),
                           figures.complete, fanoutRounds, figures.deliveryP50, figures.deliveryP99, deliveries.count,
                           figures.lastP50, figures.lastP99,
                           cpu.map { String(format: "%@ %.1f ms", $0.0, $0.1) }.joined(separator: ", ")))
        return figures
    }

    /// This process's soft open-file limit (after `raiseOpenFileLimit`).
    func openFileSoftLimit() -> Int {
        var l = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &l) == 0 else { return 0 }
        return l.rlim_cur >= rlim_t(Int.max) ? Int.max : Int(l.rlim_cur)
    }
}
