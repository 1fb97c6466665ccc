import CLMDB
import EmberCore

/// The shared change records of triggers (issue 36): the triggers of a namespace on one pattern
/// that fire on the same kinds form a group (`TriggerDefinition.group`) and read one stream of
/// records, one per log entry that gives them events, in the table `trigrec` keyed by log index
/// first (`TriggerRecordRows`; format 6 kept them in `meta` at `triggers/r/<ns>\0<group><index>`,
/// the layout snapshots still carry). A
/// write costs one record per group however many triggers read it, and no trigger's state is
/// rewritten; each trigger's cursor says how far it read, and its pending figures are the
/// stream's running counts (kept in each record) minus those at its cursor.
///
/// `triggers/g/<ns>\0<group>` holds the group's summary, written when cursors move, never per
/// write: the position of the newest record pruned (the counts go on from it once every record
/// is gone) and how far the stream may grow before some trigger reaches its retention limit
/// (a write below it checks no trigger's state).
enum TriggerChangeLog {
    /// A point of a group's stream: the record at `index` and the running counts through it.
    struct Position: Equatable {
        var index: UInt64 = 0
        var records: UInt64 = 0
        var bytes: UInt64 = 0
        var events: UInt64 = 0

        static func newer(_ a: Position, _ b: Position) -> Position { a.records >= b.records ? a : b }
    }

    struct Summary: Equatable {
        var floor = Position()
        /// A record whose running counts stay within both keeps every trigger within its
        /// limits; 0 when no trigger of the group keeps records (all past their limits).
        var allowRecords: UInt64 = 0
        var allowBytes: UInt64 = 0
    }

    static let recordFormat: UInt8 = 3
    static let headerBytes = 1 + 3 * 8

    /// A group's stream in format 6's `meta` layout (snapshots; a format-6 directory's rows).
    static func recordsPrefix(_ ns: String, _ group: UInt64) -> [UInt8] {
        var w = ByteWriter(capacity: TriggerKeys.prefix.count + 3 + ns.utf8.count + 16)
        w.bytes.append(contentsOf: TriggerKeys.prefix)
        w.bytes.append(contentsOf: "r/".utf8)
        w.bytes.append(contentsOf: ns.utf8)
        w.u8(0)
        w.u64(group)
        return w.bytes
    }

    static func summaryKey(_ ns: String, _ group: UInt64) -> [UInt8] {
        var w = ByteWriter(bytes: TriggerKeys.prefix + Array("g/".utf8) + Array(ns.utf8) + [0])
        w.u64(group)
        return w.bytes
    }

    // MARK: - Records

    static func encodeRecord(_ events: [TriggerEvent], after last: Position, index: UInt64) -> (bytes: [UInt8], at: Position) {
        // The body behind room for the header, which is filled in once the size is known: one
        // buffer, not a body copied behind a header (one record per matching write, on every replica).
        var w = ByteWriter(capacity: 256)
        w.bytes.append(contentsOf: repeatElement(0, count: headerBytes))
        TriggerRecord.encode(events, into: &w)
        let at = Position(index: index, records: last.records + 1, bytes: last.bytes + UInt64(w.bytes.count),
                          events: last.events + UInt64(events.count))
        let head = header(at)
        w.bytes.replaceSubrange(0..<headerBytes, with: head)
        return (w.bytes, at)
    }

    static func header(_ p: Position) -> [UInt8] {
        var w = ByteWriter(capacity: headerBytes)
        writeHeader(p, format: recordFormat, into: &w)
        return w.bytes
    }

    /// A record's header (`headerBytes`) in `format` (full, or `TriggerCompactRecord.locationsFormat`).
    static func writeHeader(_ p: Position, format: UInt8, into w: inout ByteWriter) {
        w.u8(format); w.u64(p.records); w.u64(p.bytes); w.u64(p.events)
    }

    /// A record's running counts (full or compact: `TriggerCompactRecord` keeps the full one's).
    static func position(_ index: UInt64, _ v: [UInt8]) throws(StorageError) -> Position {
        if TriggerCompactRecord.isCompact(v) { return try TriggerCompactRecord.position(index, v) }
        var r = ByteReader(v)
        guard try r.u8() == recordFormat else { throw .corrupt("trigger change record format") }
        return Position(index: index, records: try r.u64(), bytes: try r.u64(), events: try r.u64())
    }

    /// The events of a full record.
    static func events(_ v: [UInt8]) throws(StorageError) -> [TriggerEvent] {
        var r = ByteReader(v, at: headerBytes)
        return try TriggerRecord.decode(&r)
    }

    /// The events of the record `v` at log index `index`, full or compact (rebuilt from the
    /// entry in the log, which holds every entry a compact record names: `expandCompacted`).
    static func events(_ tables: Tables, _ t: Txn, index: UInt64, _ v: [UInt8]) throws(StorageError) -> [TriggerEvent] {
        guard TriggerCompactRecord.isCompact(v) else { return try events(v) }
        return try TriggerCompactRecord.events(v, entry: try logEntry(tables, t, index))
    }

    /// The record `v` at `index` as a full record (itself when it is one).
    static func full(_ tables: Tables, _ t: Txn, index: UInt64, _ v: [UInt8]) throws(StorageError) -> [UInt8] {
        guard TriggerCompactRecord.isCompact(v) else { return v }
        return try TriggerCompactRecord.expand(v, entry: try logEntry(tables, t, index))
    }

    static func logEntry(_ tables: Tables, _ t: Txn, _ index: UInt64) throws(StorageError) -> LogEntry {
        let bytes: [UInt8]?
        do { bytes = try t.get(tables.log, Writer.logKey(index)) } catch let e as StorageError { throw e } catch {
            throw .corrupt("log entry \(index): \(error)")
        }
        guard let bytes else { throw .corrupt("compact trigger record at \(index) without its log entry") }
        return try LogEntry(decoding: bytes)
    }

    // MARK: - Compact records

    /// Where the groups' record rows start in format 6's `meta` layout (`triggers/r/`), and
    /// whether `k` is one: at least a namespace's terminator, a group and an index after it.
    static let recordRows = TriggerKeys.prefix + Array("r/".utf8)
    static func isRecordRow(_ k: [UInt8]) -> Bool { k.count >= recordRows.count + 17 && k.starts(with: recordRows) }

    /// The namespace, group and index of such a row.
    static func legacyRow(_ k: [UInt8]) -> (ns: String, group: UInt64, index: UInt64) {
        let stream = Array(k.prefix(k.count - 8))
        return (String(decoding: stream[recordRows.count..<(stream.count - 9)], as: UTF8.self),
                TriggerKeys.index(ofRow: stream), TriggerKeys.index(ofRow: k))
    }

    /// What `expandCompacted` did: the records it made full, and the groups whose streams still
    /// held a record of an entry it looked at (full or compact): their triggers have not read
    /// them after a whole log retention, so their next records would be expanded too.
    struct Expansion {
        var expanded = 0
        var behind: Set<TriggerTails.Key> = []
    }

    /// Makes every compact record of the entries `from...through` full (`TriggerCompactRecord`),
    /// in `t`, before log compaction deletes those entries: each group's stream is looked at in
    /// that range only (entries before `from` left the log earlier, theirs were made full then).
    @discardableResult
    static func expandCompacted(_ tables: Tables, _ t: Txn, from: UInt64, through: UInt64) throws -> Expansion {
        var out = Expansion()
        guard from <= through else { return out }
        // Index first: the entries' records are one range of the table, every group's.
        let c = try t.cursor(tables.trigrec)
        defer { c.close() }
        var entry = try c.seek(TriggerRecordRows.key(max(from, 1), []))
        var seen: Set<[UInt8]> = []
        while let (k, v) = entry, TriggerRecordRows.index(of: k) <= through {
            if TriggerCompactRecord.isCompact(v) {
                try c.put(k, try full(tables, t, index: TriggerRecordRows.index(of: k), v))
                out.expanded += 1
            }
            let stream = Array(k[8...])
            if out.behind.count < TriggerTails.maxGroups && seen.insert(stream).inserted {
                let (ns, group) = TriggerRecordRows.namespaceAndGroup(k)
                out.behind.insert(TriggerTails.Key(ns: ns, group: group))
            }
            entry = try c.next()
        }
        return out
    }

    /// `put` each row under `triggers/` as stored, but compact records made full: what a
    /// snapshot carries (its installer has no log before it; older builds read full records).
    static func fullRows(_ tables: Tables, _ t: Txn, put: ([UInt8], [UInt8]) throws -> Void) throws {
        try t.scan(tables.meta, prefix: TriggerKeys.prefix) { k, v in
            if !k.starts(with: TriggerRecordRows.headPrefix) { try put(k, v) }
            return true
        }
        // The records in format 6's layout (the peer protocol's).
        try TriggerRecordRows.legacyRows(tables, t, full: { _, i, v in try full(tables, t, index: i, v) }, put: put)
    }

    // MARK: - Summary

    static func summary(_ tables: Tables, _ t: Txn, _ ns: String, _ group: UInt64) throws -> Summary {
        guard let v = try t.get(tables.meta, summaryKey(ns, group)) else { return Summary() }
        var r = ByteReader(v)
        guard try r.u8() == 1 else { throw StorageError.corrupt("trigger group summary format") }
        var s = Summary()
        s.floor = Position(index: try r.u64(), records: try r.u64(), bytes: try r.u64(), events: try r.u64())
        s.allowRecords = try r.u64()
        s.allowBytes = try r.u64()
        return s
    }

    static func putSummary(_ tables: Tables, _ t: Txn, _ ns: String, _ group: UInt64, _ s: Summary) throws {
        var w = ByteWriter(capacity: 49)
        w.u8(1)
        for v in [s.floor.index, s.floor.records, s.floor.bytes, s.floor.events, s.allowRecords, s.allowBytes] { w.u64(v) }
        try t.put(tables.meta, summaryKey(ns, group), w.bytes)
    }

    // MARK: - Positions

    /// The stream's newest position: its last record's (its head's), or the newest pruned one's.
    static func last(_ tables: Tables, _ t: Txn, _ ns: String, _ group: UInt64, floor: Position) throws -> Position {
        let head = try TriggerRecordRows.head(tables, t, TriggerRecordRows.stream(ns, group))
        return Position.newer(head?.last ?? Position(), floor)
    }

    /// `last`, and the newest record itself when it is the one at `index` (what a write's
    /// record follows, or the record an onDisconnect run's earlier write made), and the head's
    /// `prunedThrough` (the write keeps it).
    static func last(_ tables: Tables, _ t: Txn, _ stream: [UInt8], floor: Position,
                     recordAt index: UInt64) throws -> (last: Position, record: [UInt8]?, prunedThrough: UInt64) {
        guard let head = try TriggerRecordRows.head(tables, t, stream) else { return (floor, nil, 0) }
        var record: [UInt8]?
        if head.last.index == index && head.last.records > 0 {
            record = try t.get(tables.trigrec, TriggerRecordRows.key(index, stream))
        }
        return (Position.newer(head.last, floor), record, head.prunedThrough)
    }

    /// The stream's position at log index `index`: the running counts of the records at or
    /// before it (its newest such record, found walking back over the other groups' rows:
    /// when cursors move, where it is mostly the row just before).
    static func at(_ tables: Tables, _ t: Txn, _ ns: String, _ group: UInt64, index: UInt64, floor: Position) throws -> Position {
        let stream = TriggerRecordRows.stream(ns, group)
        var found = Position()
        if let head = try TriggerRecordRows.head(tables, t, stream) {
            if head.last.index <= index {
                found = head.last
            } else {
                let c = try t.cursor(tables.trigrec)
                defer { c.close() }
                var entry = try c.seekLastLT(TriggerRecordRows.key(index &+ 1, []))
                while let (k, v) = entry {
                    if TriggerRecordRows.isStream(k, stream) {
                        found = try position(TriggerRecordRows.index(of: k), v)
                        break
                    }
                    entry = try c.prev()
                }
            }
        }
        return floor.index <= index ? Position.newer(found, floor) : found
    }

    // MARK: - Reading

    /// A trigger's records after `after`, at most `limit`, in log order (those past its
    /// `keepThrough`, while it has one, are not its own).
    static func read(_ tables: Tables, _ t: Txn, _ ns: String, _ state: TriggerState, after: UInt64,
                     limit: Int, cache: TriggerRecordCache? = nil) throws -> [(index: UInt64, events: [TriggerEvent])] {
        guard state.group != 0, limit > 0, after < .max else { return [] }
        let stream = TriggerRecordRows.stream(ns, state.group)
        let start = TriggerRecordRows.key(max(after + 1, 1), [])
        // The group's newest record: the scan stops there, not at the table's end.
        guard let head = try TriggerRecordRows.head(tables, t, stream), head.last.index > after else { return [] }
        let end = state.keepThrough != 0 ? min(state.keepThrough, head.last.index) : head.last.index
        if let cache {
            // The lanes of a group read the same records: after the first, each finds them
            // decoded, so the scan copies no record's bytes; a record not cached yet is copied
            // from where the scan found it (its pages stay mapped for the transaction: no
            // second lookup by its key, which a lane alone in its group paid on every record).
            var indexes: [UInt64] = []
            var values: [UnsafeRawBufferPointer] = []
            try t.scanBorrowed(tables.trigrec, prefix: [], startingAt: start) { k, v in
                let i = TriggerRecordRows.index(of: k)
                if i > end { return false }
                // Another group's row: skipped (read in place, nothing copied).
                guard TriggerRecordRows.isStream(k, stream) else { return true }
                indexes.append(i)
                values.append(v)
                return indexes.count < limit
            }
            return try cache.events(ns, state.group, indexes: indexes,
                                    decoded: { (k: Int) throws(StorageError) -> [TriggerEvent] in
                                        try events(tables, t, index: indexes[k], Array(values[k]))
                                    })
        }
        var found: [(index: UInt64, value: [UInt8])] = []
        try t.scanBorrowed(tables.trigrec, prefix: [], startingAt: start) { k, v in
            let i = TriggerRecordRows.index(of: k)
            if i > end { return false }
            guard TriggerRecordRows.isStream(k, stream) else { return true }
            found.append((i, Array(v)))
            return found.count < limit
        }
        var out: [(index: UInt64, events: [TriggerEvent])] = []
        out.reserveCapacity(found.count)
        for r in found { out.append((r.index, try events(tables, t, index: r.index, r.value))) }
        return out
    }

    /// The trigger's state as the fronts show it: its own rows' figures plus those of the
    /// records after its cursor that are its own, every event recorded for it, and while it is
    /// past its retention limit the events of the records kept for the others since (skipped
    /// for it: its gap).
    static func folded(_ s: TriggerState, last: Position) -> TriggerState {
        guard s.group != 0 else { return s }
        var out = s
        if s.keepThrough != 0 && last.index > s.keepThrough {
            out.skipped += last.events &- min(last.events, s.keepEvents)
            if out.skipped > 0 {
                if out.gapFirst == 0 { out.gapFirst = last.index }
                out.gapLast = max(out.gapLast, last.index)
            }
        }
        let end = s.keepThrough != 0 ? (records: s.keepRecords, bytes: s.keepBytes) : (records: last.records, bytes: last.bytes)
        out.pending += end.records &- min(end.records, s.doneRecords)
        out.pendingBytes += end.bytes &- min(end.bytes, s.doneBytes)
        out.events += last.events &- min(last.events, s.eventsBase)
        return out
    }
}

/// A trigger joining or leaving a group's stream, and the migration of a 0.6.0 state.
extension TriggerChangeLog {
    /// The trigger reads the group's records after log index `from` (and after its cursor).
    static func join(_ tables: Tables, _ t: Txn, _ ns: String, _ group: UInt64, _ st: inout TriggerState, from: UInt64) throws {
        let floor = try summary(tables, t, ns, group).floor
        let last = try self.last(tables, t, ns, group, floor: floor)
        let start = from < last.index ? try at(tables, t, ns, group, index: from, floor: floor) : last
        st.group = group
        st.cursor = max(st.cursor, from)
        st.doneRecords = start.records
        st.doneBytes = start.bytes
        st.eventsBase = last.events
        st.keepThrough = 0
        st.keepRecords = 0
        st.keepBytes = 0
        st.keepEvents = 0
    }

    /// The trigger's pattern or kinds changed: the records it has not delivered become its own
    /// rows (delivered as before: never skipped), and its events count is folded.
    static func leave(_ tables: Tables, _ t: Txn, _ ns: String, name: String, _ st: inout TriggerState) throws {
        try ownRows(tables, t, ns, name: name, &st) { k, v in try t.put(tables.meta, k, v) }
    }

    /// `leave` without writing: the outbox rows the trigger's undelivered records become go to
    /// `put` (those it already has as own rows are left out) and `st` becomes the state that
    /// goes with them — a group-less state, what 0.6.0 stored (`TriggerLegacyLayout`).
    static func ownRows(_ tables: Tables, _ t: Txn, _ ns: String, name: String, _ st: inout TriggerState,
                        put: ([UInt8], [UInt8]) throws -> Void) throws {
        guard st.group != 0 else { return }
        let last = try self.last(tables, t, ns, st.group, floor: try summary(tables, t, ns, st.group).floor)
        let f = folded(st, last: last)
        (st.skipped, st.gapFirst, st.gapLast) = (f.skipped, f.gapFirst, f.gapLast)
        let events = f.events
        let outbox = TriggerKeys.outboxPrefix(ns, name)
        for (i, evs) in try read(tables, t, ns, st, after: st.cursor, limit: .max) {
            let key = TriggerKeys.row(outbox, i)
            if try t.get(tables.meta, key) != nil { continue }
            var w = ByteWriter()
            TriggerRecord.encode(evs, into: &w)
            try put(key, w.bytes)
            st.pending += 1
            st.pendingBytes += UInt64(w.bytes.count)
        }
        st.events = events
        st.group = 0
        st.doneRecords = 0; st.doneBytes = 0; st.eventsBase = 0
        st.keepThrough = 0; st.keepRecords = 0; st.keepBytes = 0; st.keepEvents = 0
    }

    /// A data directory of 0.6.0 keeps its triggers' outbox rows as their own rows (read and
    /// settled as before, nothing pending lost); each trigger joins its group from its cursor,
    /// so the entries applied from now on go to the shared records. Deterministic (every
    /// replica of one state migrates alike); nothing to do once done. Returns the triggers joined.
    @discardableResult
    static func migrate(_ tables: Tables, _ t: Txn) throws -> Int {
        var joined = 0
        for (ns, set) in try tables.allTriggerSets(t) {
            var groups: Set<UInt64> = []
            for d in set.definitions where !d.feed {
                guard var st = try tables.triggerState(t, ns, d.name), st.group != d.group else { continue }
                if st.group != 0 { try leave(tables, t, ns, name: d.name, &st) }
                try join(tables, t, ns, d.group, &st, from: st.cursor)
                try tables.putTriggerState(t, ns, d.name, st)
                groups.insert(d.group)
                joined += 1
            }
            try refresh(tables, t, ns, groups: groups, definitions: set.definitions)
        }
        return joined
    }
}
