import EmberCore

/// The values before a write at the scopes of the namespace's trigger patterns, read in the
/// apply's transaction before the write (`Applier.captureTriggers`): one item per pattern the
/// write touches (`TriggerSet.plan`).
struct TriggerCapture {
    var items: [(plan: TriggerPatternPlan, before: [Node])]
}

extension Applier {
    /// Before a write's parts (absolute path, value there now) are written: the values its
    /// triggers' events need. nil (no reads) when the namespace has no trigger the write can fire.
    /// `parts` is made only when the namespace has triggers.
    func captureTriggers(_ ns: String, parts makeParts: @autoclosure () -> [(Path, Node)]) throws -> TriggerCapture? {
        guard let set = triggers[ns], !set.isEmpty else { return nil }
        let parts = makeParts()
        var items: [(plan: TriggerPatternPlan, before: [Node])] = []
        // The values the write's parts replace, then those read here (a scope above a part).
        // One part (every set): compared, not hashed (hashing paths was a tenth of a
        // follower's trigger cost).
        var read: [Path: Node] = [:]
        if parts.count > 1 { for (p, old) in parts { read[p] = old } }
        let paths = parts.map(\.0)
        // Only the patterns the write's first keys can reach (`TriggerPatternIndex`).
        for k in set.index.candidates(paths) {
            let plan = set.plan[k]
            let scopes = TriggerChanges.scopes(plan.pattern, parts: paths)
            if scopes.isEmpty { continue }
            var before: [Node] = []
            before.reserveCapacity(scopes.count)
            for s in scopes {
                if parts.count == 1 && parts[0].0 == s { before.append(parts[0].1); continue }
                if let n = read[s] { before.append(n); continue }
                let n = try tables.readNode(t, ns, s)
                read[s] = n
                before.append(n)
            }
            items.append((plan, before))
        }
        return items.isEmpty ? nil : TriggerCapture(items: items)
    }

    /// After the write: the events of each group of triggers (one pattern, the same kinds) go
    /// to the group's shared change record for the entry, whatever the number of triggers in it
    /// (`TriggerChangeLog`); a feed's go to its own rows. Triggers on one pattern share the diff.
    /// With `compactTriggers`, a group's record whose events are all locations the write created
    /// whole is stored compact (`TriggerCompactRecord`): no value converted or encoded; but
    /// full for a group whose triggers leave their records past the log's retention
    /// (`fullTriggerGroups`), which compaction would make full anyway.
    /// Returns the groups that got events (which delivery lanes the commit wakes).
    func recordTriggers(_ e: LogEntry, _ capture: TriggerCapture, parts: [(Path, Node)]) throws -> TriggerReach {
        let (authType, authID) = Self.triggerAuth(e.auth)
        let compact = compactTriggers && TriggerCompactRecord.rebuildable(e.operation)
        var reach = TriggerReach.none
        for item in capture.items {
            let changes = TriggerChanges.changes(item.plan.pattern, parts: parts, before: item.before, deltas: false)
            if changes.isEmpty { continue }
            // Converted once for every group and feed that needs full events, when one does.
            var converted: [(before: JSON, after: JSON)]?
            func values() -> [(before: JSON, after: JSON)] {
                if let converted { return converted }
                let v = changes.map { (before: $0.before.toJSON(), after: $0.after.toJSON()) }
                converted = v
                return v
            }
            func events(_ def: TriggerDefinition) -> [TriggerEvent] {
                var out: [TriggerEvent] = []
                let values = values()
                for (k, c) in changes.enumerated() {
                    guard let type = def.firedType(for: c.kind) else { continue }
                    out.append(TriggerEvent(index: e.index, seq: out.count, timestamp: e.timestamp, type: type, location: c.location,
                                            params: c.params, before: values[k].before, after: values[k].after,
                                            delta: c.deltaIsAfter ? values[k].after : c.delta, authType: authType, authID: authID))
                }
                return out
            }
            for def in item.plan.groups {
                // The group's events in compact form while every one fits (`TriggerCompactRecord`).
                var fired = 0
                var compactEvents: [TriggerCompactRecord.Event] = []
                var after: [Node] = []
                var fits = compact && (fullTriggerGroups.isEmpty
                    || !fullTriggerGroups.contains(TriggerTails.Key(ns: e.namespace, group: def.group)))
                for c in changes {
                    guard let type = def.firedType(for: c.kind) else { continue }
                    fired += 1
                    fits = fits && TriggerCompactRecord.fits(c)
                    if fits {
                        compactEvents.append(TriggerCompactRecord.Event(type: type, location: c.location, params: c.params))
                        after.append(c.after)
                    }
                }
                if fired == 0 { continue }
                if fits {
                    try recordShared(e, def.group, count: fired,
                                     encode: { last in TriggerCompactRecord.encode(compactEvents, after: after, item.plan.pattern, entry: e, after: last) },
                                     events: { events(def) })
                } else {
                    let full = events(def)
                    try recordShared(e, def.group, count: full.count,
                                     encode: { last in TriggerChangeLog.encodeRecord(full, after: last, index: e.index) },
                                     events: { full })
                }
                reach = reach.adding(group: def.group)
            }
            for def in item.plan.feeds {
                let fired = events(def)
                if !fired.isEmpty { try recordFeed(e, def, fired) }
            }
        }
        return reach
    }

    /// A group's record of `count` events for the entry (`encode` makes it after the stream's
    /// newest position; `events` are its full events, made only when needed). Below the
    /// summary's headroom no trigger's state is read;
    /// past it, each trigger past its retention limit keeps the records it holds and no later
    /// one until it has delivered those (`keepThrough`): the gap is recorded, never a silent
    /// skip, and once no trigger of the group keeps records the entry gets none.
    func recordShared(_ e: LogEntry, _ group: UInt64, count: Int, encode: (TriggerChangeLog.Position) -> (bytes: [UInt8], at: TriggerChangeLog.Position),
                      events fresh: () -> [TriggerEvent]) throws {
        let ns = e.namespace
        let summary: TriggerChangeLog.Summary
        let last: TriggerChangeLog.Position
        let existing: [UInt8]?
        let prefix: [UInt8]
        let prunedThrough: UInt64
        var fromTail = false
        if let tail = tails?.tail(ns, group), tail.last.index < e.index {
            fromTail = true
            // An earlier write of this transaction appended the stream's newest record.
            summary = tail.summary
            last = tail.last
            existing = nil
            prefix = tail.prefix
            prunedThrough = tail.prunedThrough
        } else {
            // A tail at this index (an onDisconnect run's second write): the store's head is
            // behind it until it is written.
            if tails?.tail(ns, group)?.headOwed == true { try writeHead(tails?.forget(ns, group)) }
            prefix = TriggerRecordRows.stream(ns, group)
            summary = try TriggerChangeLog.summary(tables, t, ns, group)
            let found = try TriggerChangeLog.last(tables, t, prefix, floor: summary.floor, recordAt: e.index)
            last = found.last
            existing = found.record
            prunedThrough = found.prunedThrough
        }
        if let existing {
            try writeHead(tails?.forget(ns, group))
            // An onDisconnect run applies several writes at one index: their events share its
            // record (a full one: such an entry's records never go compact).
            let existing = try TriggerChangeLog.full(tables, t, index: e.index, existing)
            let at = try TriggerChangeLog.position(e.index, existing)
            var events = try TriggerChangeLog.events(existing)
            let before = TriggerChangeLog.Position(index: e.index, records: at.records - 1, bytes: at.bytes - UInt64(existing.count),
                                                   events: at.events - UInt64(events.count))
            for var ev in fresh() { ev.seq = events.count; events.append(ev) }
            let whole = TriggerChangeLog.encodeRecord(events, after: before, index: e.index)
            try TriggerRecordRows.put(tables, t, prefix, index: e.index, whole.bytes, at: whole.at, prunedThrough: prunedThrough)
            return
        }
        let (record, at) = encode(last)
        if at.records <= summary.allowRecords && at.bytes <= summary.allowBytes {
            if let tails {
                // The head moves with the tail, written once when the transaction ends.
                try t.putOrdered(tables.trigrec, TriggerRecordRows.key(e.index, prefix), record)
                // From the tail: only its position moves (no summary or prefix copied back).
                if !fromTail || !tails.advance(ns, group, to: at),
                   !tails.note(ns, group, TriggerTails.Tail(summary: summary, last: at, prefix: prefix, prunedThrough: prunedThrough,
                                                            headOwed: true)) {
                    try TriggerRecordRows.putHead(tables, t, prefix, TriggerRecordRows.Head(last: at, prunedThrough: prunedThrough))
                }
            } else {
                try TriggerRecordRows.put(tables, t, prefix, index: e.index, record, at: at, prunedThrough: prunedThrough)
            }
            if tails?.collecting == true {
                // Serialized here once for a group's lanes, not looked up per event by each.
                let events = triggers[ns]?.crowdedGroups.contains(group) == true
                    ? fresh().map { $0.withSharedMembers(namespace: ns) } : fresh()
                tails?.appended(ns, group, e.index, events)
            }
            return
        }
        // States and the summary are rewritten below.
        try writeHead(tails?.forget(ns, group))
        var members: [(TriggerDefinition, TriggerState)] = []
        var skipping: [(member: Int, passed: Bool)] = []
        for d in triggers[ns]?.definitions ?? [] where !d.feed && d.group == group {
            guard var st = try tables.triggerState(t, ns, d.name), st.group == group else { continue }
            var passed = false
            if st.keepThrough == 0 {
                let records = st.pending + at.records - min(at.records, st.doneRecords)
                let bytes = st.pendingBytes + at.bytes - min(at.bytes, st.doneBytes)
                if records <= UInt64(d.limits.retainEntries) && bytes <= UInt64(d.limits.retainBytes) {
                    members.append((d, st))
                    continue
                }
                // Past its limit: it keeps what it holds (through its cursor at least).
                let keep = last.index >= st.cursor ? last
                    : TriggerChangeLog.Position(index: st.cursor, records: st.doneRecords, bytes: st.doneBytes, events: last.events)
                st.keepThrough = max(keep.index, 1)
                st.keepRecords = keep.records
                st.keepBytes = keep.bytes
                st.keepEvents = keep.events
                if st.gapFirst == 0 { st.gapFirst = e.index }
                passed = true
            }
            skipping.append((members.count, passed))
            members.append((d, st))
        }
        let kept = members.count > skipping.count
        if kept { try TriggerRecordRows.put(tables, t, prefix, index: e.index, record, at: at, prunedThrough: prunedThrough) }
        for (k, passed) in skipping {
            // A record kept for the others counts its events and the skip (`folded`); without
            // one they are counted here. A state neither is unchanged: not rewritten.
            if !kept {
                members[k].1.events += UInt64(count)
                members[k].1.skipped += UInt64(count)
                members[k].1.gapLast = e.index
            } else if !passed {
                continue
            }
            try tables.putTriggerState(t, ns, members[k].0.name, members[k].1)
        }
        if !kept && !skipping.isEmpty && !skipping.contains(where: \.passed) {
            // Every trigger of the group was past its limit already (a paused one, say, once
            // its backlog reached it): no record, no hold moved, so `refresh` would delete
            // nothing and write the summary as it is (no trigger keeps records: no headroom).
            // Each write of the group then costs its triggers' counts only, not the summary's
            // rewrite and the stream's walk; the tail stays for the batch's next write.
            assert(summary.allowRecords == 0 && summary.allowBytes == 0, "a group whose triggers all skip has no headroom")
            tails?.note(ns, group, TriggerTails.Tail(summary: summary, last: last, prefix: prefix, prunedThrough: prunedThrough))
            return
        }
        try TriggerChangeLog.refresh(tables, t, ns, group, members: members)
    }

    /// Writes a forgotten tail's owed head (`TriggerTails.takeOwedHeads`).
    func writeHead(_ tail: TriggerTails.Tail?) throws {
        guard let tail else { return }
        try TriggerRecordRows.putHead(tables, t, tail.prefix, TriggerRecordRows.Head(last: tail.last, prunedThrough: tail.prunedThrough))
    }

    /// Writes the heads the transaction's tails owe: before it commits.
    func writeOwedHeads() throws {
        for tail in tails?.takeOwedHeads() ?? [] { try writeHead(tail) }
    }

    /// A feed's own row for the entry: it keeps the newest entries, the oldest go, and its
    /// cursor says which (a consumer asking for older ones is answered 410 with it).
    func recordFeed(_ e: LogEntry, _ def: TriggerDefinition, _ fresh: [TriggerEvent]) throws {
        let ns = e.namespace
        let prefix = TriggerKeys.outboxPrefix(ns, def.name)
        let key = TriggerKeys.row(prefix, e.index)
        let existing = try t.get(tables.meta, key)
        var events: [TriggerEvent] = []
        if let existing {
            var r = ByteReader(existing)
            events = try TriggerRecord.decode(&r)
        }
        for var ev in fresh { ev.seq = events.count; events.append(ev) }
        var w = ByteWriter()
        TriggerRecord.encode(events, into: &w)
        var state = try tables.triggerState(t, ns, def.name) ?? TriggerState()
        state.events += UInt64(fresh.count)
        try t.put(tables.meta, key, w.bytes)
        state.pending += existing == nil ? 1 : 0
        state.pendingBytes = state.pendingBytes - UInt64(existing?.count ?? 0) + UInt64(w.bytes.count)
        while state.pending > UInt64(def.limits.retainEntries) || state.pendingBytes > UInt64(def.limits.retainBytes) {
            var oldest: ([UInt8], Int)?
            try t.scan(tables.meta, prefix: prefix) { k, v in oldest = (k, v.count); return false }
            guard let (k, n) = oldest, k != key else { break }
            try t.delete(tables.meta, k)
            state.pending -= 1
            state.pendingBytes -= UInt64(n)
            state.cursor = TriggerKeys.index(ofRow: k)
        }
        try tables.putTriggerState(t, ns, def.name, state)
    }

    static func triggerAuth(_ auth: WriteAuth) -> (String, String?) {
        switch auth {
        case .admin: return ("admin", nil)
        case .user(nil): return ("unauthenticated", nil)
        case .user(let claims?):
            return ("app_user", claims["uid"]?.stringValue ?? claims["sub"]?.stringValue)
        }
    }
}
