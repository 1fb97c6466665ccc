import EmberCore
import Synchronization

/// The CloudEvent members an event's POST body shares with every trigger of its group (all but
/// the trigger's `source` and name, `TriggerEvent.writeSharedMembers`), serialized once for the
/// group's lanes: ten triggers on one pattern would otherwise serialize each event ten times,
/// most of a busy leader's delivery CPU. Only events of the group's shared change records go
/// through it (keyed by their log index and place, which name one event). A lane looks up a
/// whole POST's events under one lock and copies its own head (`TriggerEvent.head`) and these
/// bytes into the body: what differs per trigger is its name in each event and the signature.
/// Bounded by two generations per namespace (the newer, when full, becomes the older and the
/// older goes): lanes a window or two apart near the stream's end find what the first
/// serialized.
final class TriggerBodyCache: Sendable {
    struct Key: Hashable {
        var group: UInt64
        var index: UInt64
        var seq: Int
    }
    struct Generations {
        var current: [Key: [UInt8]] = [:]
        var previous: [Key: [UInt8]] = [:]

        func find(_ k: Key) -> [UInt8]? { current[k] ?? previous[k] }

        mutating func insert(_ k: Key, _ v: [UInt8]) {
            if current.count >= TriggerBodyCache.maxEvents {
                previous = current
                current = [:]
                current.reserveCapacity(TriggerBodyCache.maxEvents)
            }
            current[k] = v
        }
    }
    /// Named limit: events kept serialized per generation (two at most per namespace).
    static let maxEvents = 16_384
    private let namespaces = Mutex<[String: Generations]>([:])

    /// Each event's shared members, in order.
    func members(_ ns: String, group: UInt64, _ events: [TriggerEvent]) -> [[UInt8]] {
        var out: [[UInt8]] = []
        out.reserveCapacity(events.count)
        var missing: [Int] = []
        namespaces.withLock { m in
            let g = m[ns]
            for (k, e) in events.enumerated() {
                if let hit = g?.find(Key(group: group, index: e.index, seq: e.seq)) { out.append(hit) } else {
                    out.append([])
                    missing.append(k)
                }
            }
        }
        if missing.isEmpty { return out }
        for k in missing {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(384)
            events[k].writeSharedMembers(namespace: ns, into: &bytes)
            out[k] = bytes
        }
        namespaces.withLock { m in
            for k in missing { m[ns, default: Generations()].insert(Key(group: group, index: events[k].index, seq: events[k].seq), out[k]) }
        }
        return out
    }
}
