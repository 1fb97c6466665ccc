import CLMDB
import EmberCore

/// Upkeep of the groups' streams when cursors move (never per write): the records no trigger
/// holds any more go, and each group's summary is written anew.
///
/// The table is keyed by log index first, so the groups' rows interleave: with ten groups each
/// written in turn, a walk over one group's range reads ten rows for each of its own. An
/// `advance` entry moves the cursors of every lane of a namespace at once, and pruning each
/// group by a walk of its own read every row of the range once per group, on every member
/// (issue 36 (c): ten triggers on ten patterns). The groups one entry refreshes are pruned by
/// one walk instead (`prune(_:_:_:)`): each row is read once and handed to its own stream's
/// walker. Which rows go is what a walk per group deleted — the same rows on every member,
/// whatever build of this format it runs.
extension TriggerChangeLog {
    /// Named limit: records one refresh of a group deletes (one transaction's share of a long
    /// backlog delivered at once; a group with no trigger left goes whole).
    static let maxPrunedPerRefresh = 8_192

    /// One stream's part of a prune walk: its own records after `after` through `through`
    /// that no hold (after, through] covers go, at most `limit`.
    struct PruneStream {
        let stream: [UInt8]
        let after: UInt64
        let through: UInt64
        /// Held ranges (after, through], ascending and disjoint.
        let holds: [(UInt64, UInt64)]
        let limit: Int
        /// The walk's results: the newest record deleted, and where the walk stopped at the
        /// limit (the rest goes with the next refresh).
        var newest: Position?
        var stoppedAt: UInt64?

        fileprivate var hold = 0
        fileprivate var deleted = 0
        fileprivate var done: Bool
        /// The least index this stream may still act on: past its `after`, or past the hold
        /// it is in (the walk seeks when every stream waits beyond the row at hand).
        fileprivate var resume: UInt64
        /// The newest record deleted and its header (its running counts), decoded once at the
        /// end (one buffer reused: not an array per record).
        fileprivate var newestIndex: UInt64?
        fileprivate var newestHeader: [UInt8] = []

        init(stream: [UInt8], after: UInt64, through: UInt64, holds: [(UInt64, UInt64)], limit: Int = .max) {
            precondition(limit > 0, "a prune deletes something or is not asked for")
            self.stream = stream
            self.after = after
            self.through = through
            self.holds = holds
            self.limit = limit
            done = after >= through
            resume = after &+ 1
        }
    }

    /// Bytes of a record that hold its running counts (a full record's header; a compact
    /// one's, three varints at most).
    private static let positionBytes = 40

    /// Deletes each stream's records as `PruneStream` says, in one walk of the table from the
    /// least `after` (the rows of streams not walked are read in place; ranges every walked
    /// stream holds are skipped by a seek).
    static func prune(_ tables: Tables, _ t: Txn, _ streams: inout [PruneStream]) throws {
        var active = streams.indices.filter { !streams[$0].done }
        guard !active.isEmpty else { return }
        let groups = streams.map { TriggerRecordRows.index(of: $0.stream[...]) }
        let c = try t.cursor(tables.trigrec)
        defer { c.close() }
        /// A row read in place: its index and the walked stream it belongs to, if any.
        func row(_ o: MDB_cursor_op, _ key: [UInt8]? = nil) throws -> (index: UInt64, stream: Int?)? {
            try c.inPlace(o, key: key) { k, _ in
                let i = TriggerRecordRows.index(of: k)
                // The group's 8 bytes first (a cheap miss), then the whole stream.
                let g = TriggerRecordRows.index(of: k[8...])
                for s in active where groups[s] == g && TriggerRecordRows.isStream(k, streams[s].stream) { return (i, s) }
                return (i, nil)
            }
        }
        // The least index a stream may act on, and the last any may: the walk seeks to the
        // first and ends after the second.
        var wanted = UInt64.max, through = UInt64(0)
        func bounds() {
            wanted = active.map { streams[$0].resume }.min() ?? .max
            through = active.map { streams[$0].through }.max() ?? 0
        }
        func finish(_ s: Int) {
            streams[s].done = true
            active.removeAll { $0 == s }
            bounds()
        }
        bounds()
        var entry = try row(MDB_SET_RANGE, TriggerRecordRows.key(max(wanted, 1), []))
        while let (i, walked) = entry, !active.isEmpty {
            if i > through { break }
            if i < wanted {
                entry = try row(MDB_SET_RANGE, TriggerRecordRows.key(wanted, []))
                continue
            }
            guard let s = walked, i >= streams[s].resume else { entry = try row(MDB_NEXT); continue }
            if i > streams[s].through {
                finish(s)
                entry = try row(MDB_NEXT)
                continue
            }
            while streams[s].hold < streams[s].holds.count && i > streams[s].holds[streams[s].hold].1 { streams[s].hold += 1 }
            if streams[s].hold < streams[s].holds.count && i > streams[s].holds[streams[s].hold].0 {
                // Held: the stream goes on after this hold's end, or is done when it reaches its end.
                let end = streams[s].holds[streams[s].hold].1
                if end >= streams[s].through {
                    finish(s)
                } else {
                    streams[s].resume = end + 1
                    bounds()
                }
                entry = try row(MDB_NEXT)
                continue
            }
            // The batch is full: the rest goes with the group's next refresh (the same rows on
            // every member: the limit counts the stream's own rows).
            if streams[s].deleted == streams[s].limit {
                streams[s].stoppedAt = i - 1
                finish(s)
                entry = try row(MDB_NEXT)
                continue
            }
            streams[s].deleted += 1
            streams[s].newestIndex = i
            _ = try c.inPlace(MDB_GET_CURRENT) { _, v in
                streams[s].newestHeader.removeAll(keepingCapacity: true)
                streams[s].newestHeader.append(contentsOf: v.prefix(positionBytes))
            }
            try c.deleteCurrent()
            // After `mdb_cursor_del` MDB_NEXT returns the record that followed (`deletePrefix`).
            entry = try row(MDB_NEXT)
        }
        for s in streams.indices {
            if let i = streams[s].newestIndex { streams[s].newest = try position(i, streams[s].newestHeader) }
        }
    }

    /// After the group's triggers' cursors or limits changed: deletes the records no trigger
    /// holds any more (a trigger holds those after its cursor, up to its `keepThrough` while it
    /// has one) and writes the summary. No trigger left: the whole stream goes.
    static func refresh(_ tables: Tables, _ t: Txn, _ ns: String, _ group: UInt64,
                        members: [(TriggerDefinition, TriggerState)]) throws {
        try refresh(tables, t, ns, [(group, members)])
    }

    /// `refresh` with each group's members as the definitions and states in force name them.
    static func refresh(_ tables: Tables, _ t: Txn, _ ns: String, _ group: UInt64, definitions: [TriggerDefinition]) throws {
        try refresh(tables, t, ns, groups: [group], definitions: definitions)
    }

    /// `refresh` of several groups of a namespace (those one entry moved cursors of), their
    /// streams pruned by one walk.
    static func refresh(_ tables: Tables, _ t: Txn, _ ns: String, groups: some Collection<UInt64>,
                        definitions: [TriggerDefinition]) throws {
        var each: [(UInt64, [(TriggerDefinition, TriggerState)])] = []
        for group in groups.sorted() {  // a set's order is per process: keep the work's order the same everywhere
            var members: [(TriggerDefinition, TriggerState)] = []
            for d in definitions where !d.feed && d.group == group {
                if let st = try tables.triggerState(t, ns, d.name), st.group == group { members.append((d, st)) }
            }
            each.append((group, members))
        }
        try refresh(tables, t, ns, each)
    }

    private static func refresh(_ tables: Tables, _ t: Txn, _ ns: String, _ groups: [(UInt64, [(TriggerDefinition, TriggerState)])]) throws {
        var walks: [PruneStream] = []
        var kept: [(group: UInt64, members: [(TriggerDefinition, TriggerState)], head: TriggerRecordRows.Head?, walk: Int?)] = []
        var gone: [(group: UInt64, head: Bool)] = []
        for (group, members) in groups {
            let stream = TriggerRecordRows.stream(ns, group)
            let head = try TriggerRecordRows.head(tables, t, stream)
            guard !members.isEmpty else {
                // No trigger left: the whole stream goes (no limit), with its head and summary.
                if let head { walks.append(PruneStream(stream: stream, after: head.prunedThrough, through: head.last.index, holds: [])) }
                gone.append((group, head != nil))
                continue
            }
            guard let head else {
                kept.append((group, members, nil, nil))
                continue
            }
            walks.append(PruneStream(stream: stream, after: head.prunedThrough, through: head.last.index,
                                     holds: mergedHolds(members), limit: maxPrunedPerRefresh))
            kept.append((group, members, head, walks.count - 1))
        }
        try prune(tables, t, &walks)
        for (group, head) in gone {
            if head { _ = try t.delete(tables.meta, TriggerRecordRows.headKey(TriggerRecordRows.stream(ns, group))) }
            _ = try t.delete(tables.meta, summaryKey(ns, group))
        }
        for (group, members, head, walk) in kept {
            var s = try summary(tables, t, ns, group)
            if let head, let walk {
                let w = walks[walk]
                if let newest = w.newest { s.floor = Position.newer(s.floor, newest) }
                // Nothing before the least hold's start is held: the next walk starts there (or
                // where this one stopped).
                let pruned = max(head.prunedThrough, min(w.holds.first?.0 ?? head.last.index, head.last.index, w.stoppedAt ?? .max))
                if pruned != head.prunedThrough {
                    try TriggerRecordRows.putHead(tables, t, w.stream, TriggerRecordRows.Head(last: head.last, prunedThrough: pruned))
                }
            }
            // How far the stream may grow: the least of each keeping trigger's headroom.
            var allowRecords = UInt64.max, allowBytes = UInt64.max, keeping = false
            for (d, st) in members where st.keepThrough == 0 {
                keeping = true
                let r = UInt64(d.limits.retainEntries), b = UInt64(d.limits.retainBytes)
                allowRecords = min(allowRecords, r > st.pending ? r - st.pending + st.doneRecords : 0)
                allowBytes = min(allowBytes, b > st.pendingBytes ? b - st.pendingBytes + st.doneBytes : 0)
            }
            s.allowRecords = keeping ? allowRecords : 0
            s.allowBytes = keeping ? allowBytes : 0
            try putSummary(tables, t, ns, group, s)
        }
    }

    /// The ranges (after, through] the members hold, merged: a trigger holds those after its
    /// cursor, up to its `keepThrough` while it has one.
    static func mergedHolds(_ members: [(TriggerDefinition, TriggerState)]) -> [(UInt64, UInt64)] {
        let holds = members.map { (_, st) in (st.cursor, st.keepThrough != 0 ? st.keepThrough : UInt64.max) }
            .filter { $0.0 < $0.1 }.sorted { $0.0 < $1.0 }
        var merged: [(UInt64, UInt64)] = []
        for h in holds {
            if let l = merged.last, h.0 <= l.1 { merged[merged.count - 1].1 = max(l.1, h.1) } else { merged.append(h) }
        }
        return merged
    }
}
