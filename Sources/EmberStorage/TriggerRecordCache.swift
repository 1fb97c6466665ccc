import EmberCore
import Synchronization

/// Shared change records as the delivery lanes read them, decoded once for all the triggers of
/// a group: ten lanes reading the same records would otherwise decode each event ten times. A
/// record never changes once committed (its log index names one entry; an onDisconnect run
/// completes it in the transaction that creates it), so an entry is never stale. One lock per
/// read (not per record), per namespace.
///
/// Two stores, both bounded and keeping the newest: records a lane decoded from LMDB, keyed by
/// group and index in two generations (when the newer one is full it becomes the older and the
/// older goes); and the records a delivering node's writer released before their commit, kept
/// as the runs it hands over (`insert`), in log order, found by binary search. The writer hands
/// over every matching write's record, most of which no lane looks up again (they read it
/// before the commit): hashing each into a map on the writer thread was a tenth of a
/// delivering leader's trigger cost.
final class TriggerRecordCache: Sendable {
    struct Key: Hashable {
        var group: UInt64
        var index: UInt64
    }
    /// Named limit: records kept decoded per generation, and records kept of the released runs
    /// (the oldest runs go past twice this), per namespace.
    static let maxRecords = 8_192

    /// A namespace's released runs, oldest first from `head` (runs before it are gone; the
    /// array is compacted once they are half of it). Indexes increase along the runs.
    struct Released {
        var runs: [ArraySlice<TriggerReleases.Record>] = []
        var head = 0
        var count = 0

        mutating func append(_ run: ArraySlice<TriggerReleases.Record>) {
            guard let first = run.first else { return }
            // Out of log order (not expected: commits hand over runs in log order): start over,
            // so the search's order holds.
            if let last = runs.last?.last, head < runs.count, first.index <= last.index { self = Released() }
            runs.append(run)
            count += run.count
            while count > 2 * TriggerRecordCache.maxRecords && head < runs.count - 1 {
                count -= runs[head].count
                runs[head] = []
                head += 1
            }
            if head > 64 && head * 2 > runs.count {
                runs.removeFirst(head)
                head = 0
            }
        }

        /// The events of the record of `group` at `index`, if kept.
        func find(_ group: UInt64, _ index: UInt64) -> [TriggerEvent]? {
            guard head < runs.count, let oldest = runs[head].first, index >= oldest.index, let newest = runs[runs.count - 1].last,
                  index <= newest.index else { return nil }
            // The first run whose last record is at or after `index`.
            var lo = head, hi = runs.count - 1
            while lo < hi {
                let mid = (lo + hi) / 2
                if runs[mid].last!.index < index { lo = mid + 1 } else { hi = mid }
            }
            let run = runs[lo]
            // Its first record at or after `index`, then those at `index` (one per group).
            var a = run.startIndex, b = run.endIndex
            while a < b {
                let mid = (a + b) / 2
                if run[mid].index < index { a = mid + 1 } else { b = mid }
            }
            while a < run.endIndex && run[a].index == index {
                if run[a].group == group { return run[a].events }
                a += 1
            }
            return nil
        }
    }

    struct Namespace {
        var decoded = TwoGenerations<Key, [TriggerEvent]>(limit: TriggerRecordCache.maxRecords)
        var released = Released()

        func find(_ group: UInt64, _ index: UInt64) -> [TriggerEvent]? {
            decoded.find(Key(group: group, index: index)) ?? released.find(group, index)
        }
    }

    private let namespaces = Mutex<[String: Namespace]>([:])

    /// Records a delivering node's writer made and released before their commit
    /// (`TriggerReleases.committed`, in log order), once committed: a lane that reads them from
    /// LMDB after that (it fell a commit behind) finds them decoded instead of decoding every
    /// event. Kept as runs, one per namespace in a row: no work per record here.
    func insert(_ records: [TriggerReleases.Record]) {
        guard !records.isEmpty else { return }
        namespaces.withLock { m in
            var k = 0
            while k < records.count {
                let ns = records[k].namespace
                var end = k + 1
                while end < records.count && records[end].namespace == ns { end += 1 }
                var n = m.removeValue(forKey: ns) ?? Namespace()
                n.released.append(records[k..<end])
                m[ns] = n
                k = end
            }
        }
    }

    /// The events kept for the record at `index` of `group`, if any (tests).
    func cached(_ ns: String, _ group: UInt64, _ index: UInt64) -> [TriggerEvent]? {
        namespaces.withLock { $0[ns]?.find(group, index) }
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
            let n = m[ns]
            for (k, i) in indexes.enumerated() {
                if let hit = n?.find(group, i) { out.append((i, hit)) } else {
                    out.append((i, []))
                    missing.append(k)
                }
            }
        }
        if missing.isEmpty { return out }
        for k in missing { out[k].events = try decoded(k) }
        namespaces.withLock { m in
            var n = m.removeValue(forKey: ns) ?? Namespace()
            for k in missing { n.decoded.insert(Key(group: group, index: indexes[k]), out[k].events) }
            m[ns] = n
        }
        return out
    }
}
