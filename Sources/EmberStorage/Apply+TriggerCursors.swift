import EmberCore

/// Trigger bookkeeping entries applied: definitions, cursors (`advance`, `settle`), dead
/// letters and their replay, pause/halt/resume.
extension Applier {
    mutating func applyTriggers(_ e: LogEntry, _ op: TriggerOperation) throws {
        guard e.auth == .admin else { throw StorageError.invalid(.invalidData("Only an admin may change triggers")) }
        let ns = e.namespace
        // Definitions and cursors prune records and rewrite summaries (`TriggerTails`).
        for tail in tails?.forgetAll() ?? [] { try writeHead(tail) }
        switch op {
        case .define(let text):
            try defineTriggers(e, text)
        case .advance(let cursors):
            var groups: Set<UInt64> = []
            for c in cursors {
                // Bookkeeping for a trigger since removed changes nothing.
                guard var st = try tables.triggerState(t, ns, c.name) else { continue }
                // A group no longer the trigger's (redefined since it was read): only its own rows move.
                let through = c.group == st.group && c.group != 0 ? c.through : nil
                try settleTrigger(e, name: c.name, &st, indexes: c.rows, through: through, reason: nil)
                try tables.putTriggerState(t, ns, c.name, st)
                if st.group != 0 { groups.insert(st.group) }
            }
            try TriggerChangeLog.refresh(tables, t, ns, groups: groups, definitions: triggers[ns]?.definitions ?? [])
        case .settle(let name, let indexes, let reason):
            guard var st = try tables.triggerState(t, ns, name) else { return }
            try settleTrigger(e, name: name, &st, indexes: indexes, through: indexes.max(), reason: reason)
            try tables.putTriggerState(t, ns, name, st)
            if st.group != 0 { try TriggerChangeLog.refresh(tables, t, ns, st.group, definitions: triggers[ns]?.definitions ?? []) }
        case .halt(let name, let reason):
            try updateState(ns, name) { $0.halted = reason }
        case .pause(let name):
            try updateState(ns, name) { $0.paused = true }
        case .resume(let name):
            try updateState(ns, name) { $0.paused = false; $0.halted = nil }
        case .replay(let name, let from):
            guard var st = try tables.triggerState(t, ns, name) else { return }
            let outbox = TriggerKeys.outboxPrefix(ns, name), dead = TriggerKeys.deadPrefix(ns, name)
            var moved: [([UInt8], [UInt8])] = []
            try t.scan(tables.meta, prefix: dead, startingAt: TriggerKeys.row(dead, from)) { k, v in
                moved.append((k, v))
                return true
            }
            for (k, v) in moved {
                var r = ByteReader(v)
                _ = try r.string()
                let row = Array(v[r.i...])
                try t.delete(tables.meta, k)
                st.deadLetters -= 1
                let key = TriggerKeys.row(outbox, TriggerKeys.index(ofRow: k))
                if try t.get(tables.meta, key) != nil { continue }
                try t.put(tables.meta, key, row)
                st.pending += 1
                st.pendingBytes += UInt64(row.count)
            }
            try tables.putTriggerState(t, ns, name, st)
            if st.group != 0 { try TriggerChangeLog.refresh(tables, t, ns, st.group, definitions: triggers[ns]?.definitions ?? []) }
        }
    }

    private func updateState(_ ns: String, _ name: String, _ change: (inout TriggerState) -> Void) throws {
        guard var st = try tables.triggerState(t, ns, name) else { return }
        change(&st)
        try tables.putTriggerState(t, ns, name, st)
    }

    /// Replaces the namespace's triggers: a new one reads the entries after this one; one whose
    /// pattern or kinds changed keeps what it has not delivered (as its own rows) and reads its
    /// new group from here; a removed one's state, rows and dead letters go.
    mutating func defineTriggers(_ e: LogEntry, _ text: String) throws {
        let ns = e.namespace
        let set: TriggerSet
        do { set = try TriggerSet(text: text) } catch { throw StorageError.invalid(.invalidData("triggers: \(error.reason)")) }
        let old = try tables.triggerSet(t, ns)
        var groups = Set(old.definitions.map(\.group) + set.definitions.map(\.group))
        groups.remove(0)
        for d in old.definitions where set.definition(named: d.name) == nil {
            try t.delete(tables.meta, TriggerKeys.state(ns, d.name))
            try t.deletePrefix(tables.meta, TriggerKeys.outboxPrefix(ns, d.name))
            try t.deletePrefix(tables.meta, TriggerKeys.deadPrefix(ns, d.name))
        }
        for d in set.definitions {
            var st: TriggerState
            if let s = try tables.triggerState(t, ns, d.name) {
                st = s
                if st.group == d.group { continue }
                if st.group != 0 { try TriggerChangeLog.leave(tables, t, ns, name: d.name, &st) }
                st.cursor = max(st.cursor, e.index)
            } else {
                // A new trigger fires for the entries after its definition.
                st = TriggerState()
                st.cursor = e.index
            }
            if d.group != 0 { try TriggerChangeLog.join(tables, t, ns, d.group, &st, from: e.index) }
            try tables.putTriggerState(t, ns, d.name, st)
        }
        if set.isEmpty { try t.delete(tables.meta, TriggerKeys.definitions(ns)) } else {
            try t.put(tables.meta, TriggerKeys.definitions(ns), Array(set.text.utf8))
        }
        triggers[ns] = set.isEmpty ? nil : set
        // Streams no trigger reads any more go whole; the others are pruned and summed up anew.
        try TriggerChangeLog.refresh(tables, t, ns, groups: groups, definitions: set.definitions)
    }

    /// Moves a trigger's cursor: its own rows at `indexes` go (with a reason, to its dead
    /// letters, where a shared record's events at such an index are copied too), the cursor
    /// goes to `through`, and its position in its group follows. Once it delivered every
    /// record kept for it past its retention limit, it reads the records from this entry on
    /// (the gap stays recorded).
    func settleTrigger(_ e: LogEntry, name: String, _ st: inout TriggerState, indexes: [UInt64], through: UInt64?, reason: String?) throws {
        let ns = e.namespace
        let outbox = TriggerKeys.outboxPrefix(ns, name), dead = TriggerKeys.deadPrefix(ns, name)
        let records = st.group != 0 ? TriggerRecordRows.stream(ns, st.group) : nil
        let before = st.cursor
        for i in indexes {
            let key = TriggerKeys.row(outbox, i)
            var row: [UInt8]?
            if let own = try t.get(tables.meta, key) {
                try t.delete(tables.meta, key)
                st.pending -= 1
                st.pendingBytes -= UInt64(own.count)
                row = own
            } else if reason != nil, let records, i > before, st.keepThrough == 0 || i <= st.keepThrough,
                      let record = try t.get(tables.trigrec, TriggerRecordRows.key(i, records)) {
                var w = ByteWriter()
                TriggerRecord.encode(try TriggerChangeLog.events(tables, t, index: i, record), into: &w)
                row = w.bytes
            }
            guard let reason, let row else { continue }
            var w = ByteWriter()
            w.string(reason)
            w.bytes += row
            try t.put(tables.meta, TriggerKeys.row(dead, i), w.bytes)
            st.deadLetters += 1
            if st.deadLetters > TriggerState.maxDeadLetters {
                var oldest: [UInt8]?
                try t.scan(tables.meta, prefix: dead) { k, _ in oldest = k; return false }
                if let oldest { try t.delete(tables.meta, oldest); st.deadLetters -= 1 }
            }
        }
        if let through { st.cursor = max(st.cursor, through) }
        guard st.group != 0 else { return }
        let floor = try TriggerChangeLog.summary(tables, t, ns, st.group).floor
        if st.keepThrough != 0 && st.cursor >= st.keepThrough {
            // `join` counts from the stream's end: the events and the gap so far stay counted.
            let f = TriggerChangeLog.folded(st, last: try TriggerChangeLog.last(tables, t, ns, st.group, floor: floor))
            (st.events, st.skipped, st.gapFirst, st.gapLast) = (f.events, f.skipped, f.gapFirst, f.gapLast)
            try TriggerChangeLog.join(tables, t, ns, st.group, &st, from: e.index)
            return
        }
        if st.cursor != before {
            let at = try TriggerChangeLog.at(tables, t, ns, st.group, index: st.cursor, floor: floor)
            st.doneRecords = at.records
            st.doneBytes = at.bytes
        }
    }
}
