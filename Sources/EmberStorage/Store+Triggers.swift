import EmberCore

/// One trigger as the fronts and the delivery worker read it: its definition and replicated state.
public struct TriggerView: Sendable {
    public let definition: TriggerDefinition
    public let state: TriggerState
}

extension EmberStore {
    /// The checks of a trigger entry before it is logged: a definitions document that loads,
    /// names and reasons within their limits.
    static func checkTriggers(_ op: TriggerOperation) throws {
        func bad(_ why: String) -> StorageError { .invalid(.invalidData("triggers: \(why)")) }
        switch op {
        case .define(let text):
            do { _ = try TriggerSet(text: text) } catch { throw bad(error.reason) }
        case .settle(let name, let indexes, let reason):
            guard indexes.count <= TriggerOperation.maxSettle else { throw bad("at most \(TriggerOperation.maxSettle) entries per settle") }
            try checkName(name)
            if let reason, reason.utf8.count > TriggerOperation.maxReasonBytes { throw bad("reason too long") }
        case .halt(let name, let reason):
            try checkName(name)
            if reason.utf8.count > TriggerOperation.maxReasonBytes { throw bad("reason too long") }
        case .pause(let name), .resume(let name), .replay(let name, _):
            try checkName(name)
        case .advance(let cursors):
            guard cursors.count <= TriggerOperation.maxCursors else { throw bad("at most \(TriggerOperation.maxCursors) cursors per entry") }
            for c in cursors {
                try checkName(c.name)
                guard c.rows.count <= TriggerOperation.maxSettle else { throw bad("at most \(TriggerOperation.maxSettle) rows per cursor") }
            }
        }
        func checkName(_ n: String) throws {
            guard !n.isEmpty, n.utf8.count <= TriggerDefinition.maxNameBytes else { throw bad("bad trigger name") }
        }
    }

    /// The namespace's triggers in force (committed on this node).
    public func triggerSet(namespace: String) throws -> TriggerSet {
        try KeyCodec.validateNamespace(namespace)
        return try withVisibleRead { t in try tables.triggerSet(t, namespace) }
    }

    /// Namespaces that have triggers.
    public func triggerNamespaces() throws -> [String] {
        try withVisibleRead { t in Array(try tables.allTriggerSets(t).keys).sorted() }
    }

    /// Each trigger of the namespace with its state, by name (pending figures and events
    /// counted over its own rows and the shared records after its cursor).
    public func triggers(namespace: String) throws -> [TriggerView] {
        try KeyCodec.validateNamespace(namespace)
        return try withVisibleRead { t in
            var lasts: [UInt64: TriggerChangeLog.Position] = [:]
            return try tables.triggerSet(t, namespace).definitions.map { d in
                let st = try tables.triggerState(t, namespace, d.name) ?? TriggerState()
                guard st.group != 0 else { return TriggerView(definition: d, state: st) }
                let last: TriggerChangeLog.Position
                if let l = lasts[st.group] { last = l } else {
                    let floor = try TriggerChangeLog.summary(tables, t, namespace, st.group).floor
                    last = try TriggerChangeLog.last(tables, t, namespace, st.group, floor: floor)
                    lasts[st.group] = last
                }
                return TriggerView(definition: d, state: TriggerChangeLog.folded(st, last: last))
            }
        }
    }

    /// One trigger's replicated state (nil: no such trigger), without reading the definitions: a
    /// delivery lane checks it on every turn, and parsing the whole set each time cost the
    /// leader's writes (every commit wakes every lane).
    public func triggerState(namespace: String, name: String) throws -> TriggerState? {
        try KeyCodec.validateNamespace(namespace)
        return try withVisibleRead { t in try tables.triggerState(t, namespace, name) }
    }

    /// Entries of a trigger to deliver after log index `after` (nil: from the oldest), at most
    /// `limit`, in log order: its own rows merged with the shared records after its cursor.
    public func triggerOutbox(namespace: String, trigger: String, after: UInt64?, limit: Int) throws -> [(index: UInt64, events: [TriggerEvent])] {
        try triggerOutboxRead(namespace: namespace, trigger: trigger, after: after, limit: limit).rows.map { ($0.index, $0.events) }
    }

    /// `triggerOutbox` with each row's source and the group read (what the worker's cursor
    /// entry names).
    public func triggerOutboxRead(namespace: String, trigger: String, after: UInt64?, limit: Int, floor: UInt64 = 0) throws -> TriggerOutboxRead {
        try withVisibleRead { t in try outboxRows(t, namespace, trigger, after: after, limit: limit, floor: floor).read }
    }

    /// `triggerOutboxRead` for a delivery lane, which need not wait for an apply released
    /// before its commit (`TriggerReleases`): the committed state read at once, plus the
    /// records of the pending apply. The same rows the waiting read returns after the commit;
    /// it waits instead when the pending apply changed more than its group's records, or the
    /// committed state holds own rows of the trigger (rare: a 0.6.0 outbox, replayed dead
    /// letters; an `advance` pending may have settled them). `floor`: the lane delivered and
    /// logged every shared record through it (a pending `advance` may not show in the cursor).
    public func triggerDeliveryRead(namespace: String, trigger: String, after: UInt64?, limit: Int, floor: UInt64) throws -> TriggerOutboxRead {
        let waiting = { try self.triggerOutboxRead(namespace: namespace, trigger: trigger, after: after, limit: limit, floor: floor) }
        guard let early = core.triggerReleases.view(namespace, core.visibility) else { return try waiting() }
        let (read, st) = try core.withRead { t in try outboxRows(t, namespace, trigger, after: after, limit: limit, floor: floor) }
        if read.rows.contains(where: { $0.own }) { return try waiting() }
        guard let st, st.group != 0, st.keepThrough == 0, early.hasRecords, read.rows.count < limit else { return read }
        var out = read
        // Newer than every committed record: those the pending apply wrote for the group.
        var last = max(after ?? 0, st.cursor, floor, read.rows.last?.index ?? 0)
        early.forEach(group: st.group) { r in
            if r.index > last {
                out.rows.append((r.index, r.events, false))
                last = r.index
            }
            return out.rows.count < limit
        }
        return out
    }

    /// One trigger's replicated state for its delivery lane: `triggerState`, without waiting
    /// for a pending apply that changed nothing but its namespace's records and cursors
    /// (`TriggerReleases`): no pause, halt or definition is pending then.
    public func triggerDeliveryState(namespace: String, name: String) throws -> TriggerState? {
        try KeyCodec.validateNamespace(namespace)
        guard core.triggerReleases.view(namespace, core.visibility) != nil else { return try triggerState(namespace: namespace, name: name) }
        return try core.withRead { t in try tables.triggerState(t, namespace, name) }
    }

    /// A trigger's own rows and its group's records after `after` (those after its cursor and
    /// `floor`), merged in log order, at most `limit`; and its state.
    func outboxRows(_ t: Txn, _ namespace: String, _ trigger: String, after: UInt64?, limit: Int,
                    floor: UInt64) throws -> (read: TriggerOutboxRead, state: TriggerState?) {
        guard let st = try tables.triggerState(t, namespace, trigger) else { return (TriggerOutboxRead(group: 0, rows: []), nil) }
        let own = try tables.triggerRows(t, prefix: TriggerKeys.outboxPrefix(namespace, trigger), after: after, limit: limit)
        let shared = try TriggerChangeLog.read(tables, t, namespace, st, after: max(after ?? 0, st.cursor, floor), limit: limit,
                                               cache: triggerRecords)
        var rows: [(index: UInt64, events: [TriggerEvent], own: Bool)] = []
        rows.reserveCapacity(min(limit, own.count + shared.count))
        var a = 0, b = 0
        while rows.count < limit && (a < own.count || b < shared.count) {
            if b == shared.count || (a < own.count && own[a].index <= shared[b].index) {
                // An own row and a record at one index: the own row (not expected; defensive).
                if b < shared.count && own[a].index == shared[b].index { b += 1 }
                rows.append((own[a].index, own[a].events, true))
                a += 1
            } else {
                rows.append((shared[b].index, shared[b].events, false))
                b += 1
            }
        }
        return (TriggerOutboxRead(group: st.group, rows: rows), st)
    }

    /// Dead letters of a trigger (oldest first), at most `limit`.
    public func triggerDeadLetters(namespace: String, trigger: String, limit: Int) throws -> [(index: UInt64, reason: String, events: [TriggerEvent])] {
        try withVisibleRead { t in
            try tables.triggerRows(t, prefix: TriggerKeys.deadPrefix(namespace, trigger), after: nil, limit: limit).map { ($0.index, $0.reason ?? "", $0.events) }
        }
    }
}
