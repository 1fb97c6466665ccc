import EmberCore
import Synchronization

/// Shared change records as the delivery lanes read them, decoded once for all the triggers of
/// a group: ten lanes reading the same records would otherwise decode each event ten times. A
/// record never changes once committed (its log index names one entry; an onDisconnect run
/// completes it in the transaction that creates it), so an entry is never stale; the cache is
/// bounded and simply emptied when full (the lanes read near the stream's end, so what they
/// need next is decoded again at most once).
final class TriggerRecordCache: Sendable {
    struct Key: Hashable {
        var namespace: String
        var group: UInt64
        var index: UInt64
    }
    /// Named limit: records kept decoded.
    static let maxRecords = 4_096
    private let entries = Mutex<[Key: [TriggerEvent]]>([:])

    func events(_ ns: String, _ group: UInt64, _ index: UInt64,
                decode: () throws(StorageError) -> [TriggerEvent]) throws(StorageError) -> [TriggerEvent] {
        let key = Key(namespace: ns, group: group, index: index)
        if let hit = entries.withLock({ $0[key] }) { return hit }
        let events = try decode()
        entries.withLock { e in
            if e.count >= Self.maxRecords { e.removeAll(keepingCapacity: true) }
            e[key] = events
        }
        return events
    }
}
