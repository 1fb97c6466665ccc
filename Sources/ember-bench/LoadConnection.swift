import NIOCore

/// When a load connection measures: requests sent from `measureFrom` and answered by `end`
/// count (the warm-up before is not measured); none is sent after `end`.
struct LoadTiming: Sendable {
    let measureFrom: NIODeadline
    let end: NIODeadline

    /// From now: `warmup` seconds unmeasured, then `duration` measured.
    init(warmup: Double, duration: Double) {
        let start = NIODeadline.now()
        measureFrom = start + .nanoseconds(Int64(warmup * 1e9))
        end = start + .nanoseconds(Int64((warmup + duration) * 1e9))
    }
}

/// What one load connection (wire protocol or raw HTTP) saw over a run.
struct LoadOutcome: Sendable {
    var latencies: [Double] = []  // ms
    var errors = 0
    var ok = 0
    /// Times the connection was opened again after a failure (raw HTTP only).
    var reconnects = 0
    /// The first refused answer's text (status and start of the body, or the transport error),
    /// so a run's errors say what they were.
    var firstError: String?
}

extension HTTPLoad.Result {
    /// A load's figures from its connections' outcomes; `failedConnections` count as one error each.
    init(name: String, outcomes: [LoadOutcome], failedConnections: Int = 0, seconds: Double) {
        var lat = outcomes.flatMap(\.latencies)
        lat.sort()
        func pct(_ p: Double) -> Double { lat.isEmpty ? 0 : lat[min(lat.count - 1, Int(Double(lat.count) * p))] }
        self.init(name: name, count: lat.count, errors: outcomes.map(\.errors).reduce(0, +) + failedConnections,
                  seconds: seconds, p50: pct(0.5), p99: pct(0.99), total: outcomes.map(\.ok).reduce(0, +))
    }
}
