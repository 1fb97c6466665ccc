import CLMDB
import EmberCore
import Foundation

/// The writer's Raft primitives: a cluster member's log appends, its applies of committed
/// entries and its hard state (split from Writer.swift; the same thread confinement holds).
extension Writer {
    /// Puts entries into the log table, with their given encodings when there are some (appended
    /// with full pages; an entry replacing a conflicting one is put plainly: `putOrdered`).
    func putLog(_ t: Txn, _ entries: [LogEntry], _ encoded: [[UInt8]]?) throws {
        precondition(encoded == nil || encoded!.count == entries.count, "one encoding per entry")
        for (i, e) in entries.enumerated() {
            if let bytes = encoded?[i] {
                assert(bytes == e.encoded(), "a given encoding differs from the entry's")
                try t.putOrdered(tables.log, Self.logKey(e.index), bytes)
            } else {
                try t.putOrdered(tables.log, Self.logKey(e.index), e.encoded())
            }
        }
    }

    /// The encoded sizes of `entries` (`DecodedTail`'s byte bound): given, or counted.
    static func sizes(_ entries: [LogEntry], _ encoded: [[UInt8]]?) -> [Int] {
        encoded?.map(\.count) ?? entries.map { $0.encodedSize() }
    }

    func append(_ entries: [LogEntry], encoded: [[UInt8]]? = nil) throws {
        guard let first = entries.first else { return }
        for (a, b) in zip(entries, entries.dropFirst()) where b.index != a.index + 1 {
            throw StorageError.logMismatch("entries are not contiguous at \(b.index)")
        }
        guard first.index > applied else { throw StorageError.logMismatch("entry \(first.index) is already applied (\(applied))") }
        guard first.index <= lastIndex + 1 else { throw StorageError.logMismatch("gap: last is \(lastIndex), got \(first.index)") }
        let last = entries.last!
        try writeTxn { t in
            // Replace any conflicting suffix.
            var i = first.index
            while i <= lastIndex { try t.delete(tables.log, Self.logKey(i)); i += 1 }
            try putLog(t, entries, encoded)
            try tables.putMetaU64(t, "lastIndex", last.index)
            try tables.putMetaU64(t, "lastTerm", last.term)
        }
        lastIndex = last.index
        lastTerm = last.term
        decoded.appended(entries, sizes: Self.sizes(entries, encoded))
        publishState()
    }

    /// Applies the logged entries `from...through` inside `t` (in `mode`, see `ApplyMode`),
    /// collecting their results and the last applied term and latest timestamp.
    /// `fresh`: entries logged in `t` itself (contiguous); they and those `decoded` keeps are not
    /// read back from the log.
    func applyLogged(_ t: Txn, from: UInt64, through: UInt64, mode: ApplyMode, results: inout [WriteResult],
                     term: inout UInt64, timestamp: inout Int64, fresh: [LogEntry] = []) throws {
        func each(_ apply: (LogEntry) throws -> WriteResult) throws {
            var i = from
            let freshFirst = fresh.first?.index ?? 0
            while i <= through {
                let e: LogEntry
                if !fresh.isEmpty && i >= freshFirst && i - freshFirst < UInt64(fresh.count) {
                    e = fresh[Int(i - freshFirst)]
                } else if let kept = decoded.entry(at: i) {
                    e = kept
                } else {
                    guard let bytes = try t.get(tables.log, Self.logKey(i)) else {
                        throw StorageError.logMismatch("entry \(i) is not in the log")
                    }
                    e = try LogEntry(decoding: bytes)
                }
                assert(e.index == i, "entry \(e.index) applied at \(i)")
                results.append(try apply(e))
                term = e.term
                timestamp = max(timestamp, e.timestamp)
                i += 1
            }
        }
        try withEntryApplier(t, mode: mode) { apply in try each { e in try apply(e, nil, nil) } }
        try pendingVersions?.flush(tables, t)
    }

    /// `metaSync` false: the commits skip LMDB's meta-page sync (see `EmberStore.applyCommitted`).
    func applyCommitted(through target: UInt64, metaSync: Bool = true) throws -> [WriteResult] {
        self.metaSync = metaSync
        defer { self.metaSync = true }
        return try applyCommittedBatches(through: target)
    }

    /// Before anything of a batch is published: a rules change is followed by work on the
    /// listeners' feed that reads the data (rules revocation), and that thread never waits for a
    /// release (the writer may wait on it), so a batch that changes rules is made visible first.
    func commitBeforePublishing(_ results: [WriteResult]) {
        if pending != nil && results.contains(where: \.rulesChanged) { commitPending() }
    }

    private func applyCommittedBatches(through target: UInt64) throws -> [WriteResult] {
        let end = min(target, lastIndex)
        var all: [WriteResult] = []
        while applied < end {
            all.appendBatch(try applyBatch(through: hashPoints.cap(min(end, applied + UInt64(store.options.maxBatchEntries)), applied: applied)))
        }
        return all
    }

    /// One apply batch, `applied + 1 ... stop`, in one transaction, then published. With `fresh`
    /// (`appendAndApply`), the same transaction first replaces the log from `fresh[0].index` on
    /// with those entries (contiguous, checked by the caller). `logged` false (`applyUnlogged`):
    /// `fresh` is exactly the batch and gets no log rows; the log then starts after `stop`.
    func applyBatch(through stop: UInt64, appending fresh: [LogEntry] = [], encoded: [[UInt8]]? = nil,
                    logged: Bool = true) throws -> [WriteResult] {
        assert(logged || (fresh.first?.index == applied + 1 && fresh.last?.index == stop), "an unlogged batch is exactly its entries")
        let last: (index: UInt64, term: UInt64) = fresh.last.map { ($0.index, $0.term) } ?? (lastIndex, lastTerm)
        var results: [WriteResult] = []
        var aTerm = appliedTerm
        var ts = lastTimestamp
        let first = try withApplyRetry { mode in
            results = []; aTerm = appliedTerm; ts = lastTimestamp
            return try writeTxn { t in
                if logged, let head = fresh.first {
                    var i = head.index
                    while i <= lastIndex { try t.delete(tables.log, Self.logKey(i)); i += 1 }
                    try putLog(t, fresh, encoded)
                }
                // Logged entries stay in the log until compaction expands their compact records.
                compactTriggers = logged && store.options.logRetention > 0 && store.options.compactTriggerRecords
                defer { compactTriggers = false }
                try applyLogged(t, from: applied + 1, through: stop, mode: mode, results: &results, term: &aTerm, timestamp: &ts,
                                fresh: fresh)
                return try finish(t, applied: stop, appliedTerm: aTerm, last: last.index, lastTerm: last.term, ts: ts,
                                  retention: logged ? nil : 0)
            }
        }
        lastIndex = last.index; lastTerm = last.term
        applied = stop; appliedTerm = aTerm; firstIndex = first; lastTimestamp = ts
        if logged && !fresh.isEmpty { decoded.appended(fresh, sizes: Self.sizes(fresh, encoded)) }
        decoded.applied(through: stop)
        commitBeforePublishing(results)
        // Released before its commit: a delivery lane reads its records from here meanwhile.
        if let seq = pending?.seq, store.triggerReleases.active {
            store.triggerReleases.add(seq: seq, results: results, records: releasedRecords)
        }
        publishRules()
        publishState()
        store.metricsState.withLock { $0.entriesCommitted += UInt64(results.count) }
        store.publish(results)
        return results
    }

    func setHardState(_ h: HardState) throws {
        try writeTxn { t in
            try tables.putMetaU64(t, "term", h.term)
            if let v = h.votedFor { try t.put(tables.meta, Array("votedFor".utf8), Array(v.utf8)) } else { try t.delete(tables.meta, Array("votedFor".utf8)) }
        }
        term = h.term
        votedFor = h.votedFor
    }
}

extension Array where Element == WriteResult {
    /// Appends a batch's results; the first batch is taken as it is (`+=` on an empty array
    /// copies every result, retaining and then releasing each of its parts).
    mutating func appendBatch(_ batch: [WriteResult]) {
        if isEmpty { self = batch } else { self += batch }
    }
}
