import EmberCore
import Synchronization

/// Shared change records as the delivery lanes read them, decoded once for all the triggers of
/// a group: ten lanes reading the same records would otherwise decode each event ten times. A
/// record never changes once committed (its log index names one entry; an onDisconnect run
/// completes it in the transaction that creates it), so an entry is never stale. One lock per
/// read (not per record), keyed per namespace by group and index. Bounded by two generations:
/// when the newer one is full it becomes the older and the older goes, so the records the
/// lanes read next (near the stream's end, where lanes a window or two apart read the same
/// ones) stay decoded.
final class TriggerRecordCache: Sendable {
    struct Key: Hashable {
        var group: UInt64
        var index: UInt64
    }
    /// Named limit: records kept decoded per generation (two at most per namespace).
    static let maxRecords = 8_192
    private let namespaces = Mutex<[String: TwoGenerations<Key, [TriggerEvent]>]>([:])

    /// Records a delivering node's writer made and released before their commit
    /// (`TriggerReleases.committed`), once committed: a lane that reads them from LMDB after
    /// that (it fell a commit behind) finds them decoded instead of decoding every event.
    func insert(_ records: [TriggerReleases.Record]) {
        guard !records.isEmpty else { return }
        namespaces.withLock { m in
            // One namespace lookup per run of records of one namespace (a write's whole batch,
            // mostly), not one per record: the writer thread inserts every matching write's.
            var k = 0
            while k < records.count {
                let ns = records[k].namespace
                var end = k + 1
                while end < records.count && records[end].namespace == ns { end += 1 }
                var g = m.removeValue(forKey: ns) ?? TwoGenerations(limit: Self.maxRecords)
                for r in records[k..<end] { g.insert(Key(group: r.group, index: r.index), r.events) }
                m[ns] = g
                k = end
            }
        }
    }

    /// The events kept for the record at `index` of `group`, if any (tests).
    func cached(_ ns: String, _ group: UInt64, _ index: UInt64) -> [TriggerEvent]? {
        namespaces.withLock { $0[ns]?.find(Key(group: group, index: index)) }
    }

    /// The events of `rows` (index and stored record, in read order), decoded by `decode` where
    /// no lane did before.
    func events(_ ns: String, _ group: UInt64, _ rows: [(index: UInt64, value: [UInt8])],
                decode: ([UInt8]) throws(StorageError) -> [TriggerEvent]) throws(StorageError) -> [(index: UInt64, events: [TriggerEvent])] {
        try events(ns, group, indexes: rows.map(\.index), value: { rows[$0].value }, decode: decode)
    }

    /// The events of the records at `indexes` (read order); `value(k)` gives the k-th one's
    /// stored bytes, asked only for a record no lane decoded before.
    func events(_ ns: String, _ group: UInt64, indexes: [UInt64], value: (Int) throws(StorageError) -> [UInt8],
                decode: ([UInt8]) throws(StorageError) -> [TriggerEvent]) throws(StorageError) -> [(index: UInt64, events: [TriggerEvent])] {
        try events(ns, group, indexes: indexes, decoded: { (k: Int) throws(StorageError) -> [TriggerEvent] in try decode(try value(k)) })
    }

    /// The events of the records at `indexes` (read order); `decoded(k)` gives the k-th one's
    /// events, asked only for a record no lane decoded before.
    func events(_ ns: String, _ group: UInt64, indexes: [UInt64],
                decoded: (Int) throws(StorageError) -> [TriggerEvent]) throws(StorageError) -> [(index: UInt64, events: [TriggerEvent])] {
        var out: [(index: UInt64, events: [TriggerEvent])] = []
        out.reserveCapacity(indexes.count)
        var missing: [Int] = []
        namespaces.withLock { m in
            let g = m[ns]
            for (k, i) in indexes.enumerated() {
                if let hit = g?.find(Key(group: group, index: i)) { out.append((i, hit)) } else {
                    out.append((i, []))
                    missing.append(k)
                }
            }
        }
        if missing.isEmpty { return out }
        for k in missing { out[k].events = try decoded(k) }
        namespaces.withLock { m in
            for k in missing { m[ns, default: TwoGenerations(limit: Self.maxRecords)].insert(Key(group: group, index: indexes[k]), out[k].events) }
        }
        return out
    }
}
