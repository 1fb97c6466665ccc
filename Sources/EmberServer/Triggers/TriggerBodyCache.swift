import EmberCore
import Synchronization

/// The CloudEvent members an event's POST body shares with every trigger of its group (all but
/// the trigger's `source` and name, `TriggerEvent.writeSharedMembers`), serialized once for the
/// group's lanes: ten triggers on one pattern would otherwise serialize each event ten times,
/// most of a busy leader's delivery CPU. Only events of the group's shared change records go
/// through it (keyed by their log index and place, which name one event). Bounded; emptied
/// when full (the lanes deliver near the stream's end, so little is serialized twice).
final class TriggerBodyCache: Sendable {
    struct Key: Hashable {
        var namespace: String
        var group: UInt64
        var index: UInt64
        var seq: Int
    }
    /// Named limit: events kept serialized.
    static let maxEvents = 16_384
    private let entries = Mutex<[Key: [UInt8]]>([:])

    func members(_ ns: String, group: UInt64, _ e: TriggerEvent) -> [UInt8] {
        let key = Key(namespace: ns, group: group, index: e.index, seq: e.seq)
        if let hit = entries.withLock({ $0[key] }) { return hit }
        var out: [UInt8] = []
        out.reserveCapacity(384)
        e.writeSharedMembers(namespace: ns, into: &out)
        entries.withLock { m in
            if m.count >= Self.maxEvents { m.removeAll(keepingCapacity: true) }
            m[key] = out
        }
        return out
    }
}
