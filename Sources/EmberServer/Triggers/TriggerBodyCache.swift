import EmberCore
import Synchronization

/// The CloudEvent members an event's POST body shares with every trigger of its group (all but
/// the trigger's `source` and name, `TriggerEvent.writeSharedMembers`), serialized once for the
/// group's lanes: ten triggers on one pattern would otherwise serialize each event ten times,
/// most of a busy leader's delivery CPU. Only events of the group's shared change records go
/// through it (keyed by their log index and place, which name one event). What differs per
/// trigger is its head in front of each event (`TriggerEvent.head`) and the signature.
/// Events the apply released to the lanes come with their members serialized already
/// (`TriggerEvent.sharedMembers`) and skip it; it serves those a lane decoded from LMDB.
///
/// Two levels: each event's members, and a batching lane's whole POST of them concatenated
/// (`SharedBatch`). The lanes of a group read the same records from the same cursor and cut
/// the same batches, so the second lane to send a batch finds it with one lookup and copies
/// its head and the batch's bytes into its body, instead of a lookup and an array per event.
/// Bounded by two generations per namespace each (the newer, when full, becomes the older and
/// the older goes): lanes a window or two apart near the stream's end find what the first made.
final class TriggerBodyCache: Sendable {
    struct Key: Hashable, Sendable {
        var group: UInt64
        var index: UInt64
        var seq: Int
    }
    /// A batch's events named by their first one and their number; the hit is checked against
    /// every event's key (a lane that skipped records past its retention limit may cut a
    /// different run of the same length from the same first event).
    struct BatchKey: Hashable, Sendable {
        var first: Key
        var count: Int
    }
    /// A POST's shared members, concatenated, and where each event's end.
    struct SharedBatch: Sendable {
        var keys: [Key]
        var bytes: [UInt8]
        var ends: [Int]
    }
    /// Named limits: events kept serialized per generation, and bytes of batches kept per
    /// generation (two generations at most per namespace each).
    static let maxEvents = 16_384
    static let maxBatchBytes = 8 << 20
    private let namespaces = Mutex<[String: TwoGenerations<Key, [UInt8]>]>([:])
    private let batches = Mutex<[String: TwoGenerations<BatchKey, SharedBatch>]>([:])

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
        var writer = TriggerMembersWriter(namespace: ns)
        for k in missing {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(384)
            writer.write(events[k], into: &bytes)
            out[k] = bytes
        }
        namespaces.withLock { m in
            for k in missing {
                m[ns, default: TwoGenerations(limit: Self.maxEvents)].insert(Key(group: group, index: events[k].index, seq: events[k].seq), out[k])
            }
        }
        return out
    }

    /// The shared members of a batch of `count` events of the group (`key(k)`: the k-th
    /// event's index and place), concatenated; `event(k)` gives the k-th event when the batch
    /// is not cached yet. nil when an event is not there (the caller builds the body from
    /// what it has).
    func batch(_ ns: String, group: UInt64, count: Int, key: (Int) -> (index: UInt64, seq: Int),
               event: (Int) -> TriggerEvent?) -> SharedBatch? {
        guard count > 0 else { return nil }
        let k0 = key(0)
        let bk = BatchKey(first: Key(group: group, index: k0.index, seq: k0.seq), count: count)
        if let hit = batches.withLock({ $0[ns]?.find(bk) }),
           hit.keys.indices.allSatisfy({ k in let e = key(k); return hit.keys[k].index == e.index && hit.keys[k].seq == e.seq }) {
            return hit
        }
        var events: [TriggerEvent] = []
        events.reserveCapacity(count)
        for k in 0..<count {
            guard let e = event(k) else { return nil }
            events.append(e)
        }
        let members = self.members(ns, group: group, events)
        var b = SharedBatch(keys: events.map { Key(group: group, index: $0.index, seq: $0.seq) }, bytes: [], ends: [])
        b.bytes.reserveCapacity(members.reduce(0) { $0 + $1.count })
        b.ends.reserveCapacity(count)
        for m in members {
            b.bytes.append(contentsOf: m)
            b.ends.append(b.bytes.count)
        }
        batches.withLock { $0[ns, default: TwoGenerations(limit: Self.maxBatchBytes)].insert(bk, b, weight: max(1, b.bytes.count)) }
        return b
    }
}
