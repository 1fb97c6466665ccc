import EmberCore
import Synchronization

/// What the delivery worker saw on this node (not replicated): each trigger's last error and
/// recent deliveries, and the counters and latency histogram `/metrics` shows.
public final class TriggerRuntime: Sendable {
    public struct Delivery: Sendable {
        /// The events POSTed (their ids are made when shown, not per delivery).
        public var events: [TriggerDelivery.Event]
        public var ids: [String] { events.map(Self.id) }
        static func id(_ e: TriggerDelivery.Event) -> String { "\(e.index)-\(e.seq)" }

        /// As the admin endpoint and the console show it: the events' count, first and last
        /// id, and at most `maxIdsShown` ids (a batch of 1,000 events would otherwise list
        /// 1,000 ids, 200,000 per GET for ten busy triggers).
        var json: JSON {
            var o: KeyMap<JSON> = [
                "events": .int(Int64(events.count)),
                "ids": .array(events.prefix(TriggerRuntime.maxIdsShown).map { .string(Self.id($0)) }),
                "outcome": .string(outcome), "status": status.map { .int(Int64($0)) } ?? .null,
                "millis": .int(millis), "at": .int(at),
            ]
            if let first = events.first, let last = events.last {
                o["firstId"] = .string(Self.id(first))
                o["lastId"] = .string(Self.id(last))
            }
            return .object(o)
        }
        public var outcome: String
        public var status: Int?
        public var millis: Int64
        public var at: Int64
    }

    struct Lane {
        var lastError: String?
        var recent: [Delivery] = []
        var delivering = false
    }

    struct State {
        var lanes: [String: Lane] = [:]
        /// Events by outcome: delivered, failed (an attempt), dead.
        var outcomes: [String: UInt64] = [:]
        /// Commit (the entry's timestamp) to a 2xx, per event.
        var latencyCounts = [UInt64](repeating: 0, count: TriggerRuntime.latencyBuckets.count + 1)
        var latencySum: Double = 0
    }

    private let state = Mutex(State())

    /// Named limits: recent deliveries kept per trigger, and event ids each one shows (README,
    /// "Triggers": `events`, `firstId` and `lastId` say the rest).
    static let maxRecent = 20
    static let maxIdsShown = 10
    static let latencyBuckets: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

    static func key(_ ns: String, _ name: String) -> String { ns + "/" + name }

    /// `latencies`: seconds from commit to the answer, each for `count` events.
    func recorded(_ ns: String, _ name: String, _ d: Delivery, events: Int, latencies: [(seconds: Double, count: Int)]) {
        state.withLock { s in
            var lane = s.lanes[Self.key(ns, name)] ?? Lane()
            lane.recent.append(d)
            if lane.recent.count > Self.maxRecent { lane.recent.removeFirst(lane.recent.count - Self.maxRecent) }
            if d.outcome != "delivered" { lane.lastError = d.outcome }
            s.lanes[Self.key(ns, name)] = lane
            s.outcomes[d.outcome == "delivered" ? "delivered" : "failed", default: 0] += UInt64(events)
            for (l, n) in latencies {
                let i = Self.latencyBuckets.firstIndex { l <= $0 } ?? Self.latencyBuckets.count
                s.latencyCounts[i] += UInt64(n)
                s.latencySum += l * Double(n)
            }
        }
    }

    func dead(events: Int) { state.withLock { $0.outcomes["dead", default: 0] += UInt64(events) } }

    func setDelivering(_ ns: String, _ name: String, _ on: Bool) {
        state.withLock { $0.lanes[Self.key(ns, name), default: Lane()].delivering = on }
    }

    /// This node's view of one trigger, for the status and the admin endpoint.
    func json(_ ns: String, _ name: String) -> JSON {
        state.withLock { s in
            let lane = s.lanes[Self.key(ns, name)] ?? Lane()
            return .object([
                "delivering": .bool(lane.delivering),
                "lastError": lane.lastError.map { .string($0) } ?? .null,
                "recent": .array(lane.recent.map(\.json)),
            ])
        }
    }

    /// Prometheus text: deliveries by outcome, the latency histogram, and each trigger's lag
    /// (`lag`: undelivered log entries per namespace/trigger, read from the replicated state).
    func metricsText(lag: [(ns: String, name: String, entries: UInt64, behind: Bool)]) -> String {
        let s = state.withLock { $0 }
        var out = "# HELP ember_trigger_deliveries_total Trigger events by outcome (delivered, failed attempt, dead-lettered).\n"
        out += "# TYPE ember_trigger_deliveries_total counter\n"
        for o in ["delivered", "failed", "dead"] { out += "ember_trigger_deliveries_total{outcome=\"\(o)\"} \(s.outcomes[o] ?? 0)\n" }
        out += "# HELP ember_trigger_latency_seconds From an event's commit to its receiver's 2xx.\n"
        out += "# TYPE ember_trigger_latency_seconds histogram\n"
        var cumulative: UInt64 = 0
        for (i, b) in Self.latencyBuckets.enumerated() {
            cumulative += s.latencyCounts[i]
            out += "ember_trigger_latency_seconds_bucket{le=\"\(b)\"} \(cumulative)\n"
        }
        cumulative += s.latencyCounts[Self.latencyBuckets.count]
        out += "ember_trigger_latency_seconds_bucket{le=\"+Inf\"} \(cumulative)\n"
        out += "ember_trigger_latency_seconds_sum \(s.latencySum)\nember_trigger_latency_seconds_count \(cumulative)\n"
        out += "# HELP ember_trigger_lag_entries Log entries with events not yet delivered, per trigger.\n"
        out += "# TYPE ember_trigger_lag_entries gauge\n"
        for l in lag { out += "ember_trigger_lag_entries{namespace=\"\(l.ns)\",trigger=\"\(l.name)\"} \(l.entries)\n" }
        out += "# HELP ember_trigger_behind 1 when a trigger passed its retention limit and has a gap.\n"
        out += "# TYPE ember_trigger_behind gauge\n"
        for l in lag { out += "ember_trigger_behind{namespace=\"\(l.ns)\",trigger=\"\(l.name)\"} \(l.behind ? 1 : 0)\n" }
        return out
    }
}
