import EmberCore

/// The values before a write at the scopes of the namespace's triggers, read in the apply's
/// transaction before the write (`Applier.captureTriggers`).
struct TriggerCapture {
    var items: [(TriggerDefinition, [Node])]
}

extension Applier {
    /// Before a write's parts (absolute path, value there now) are written: the values its
    /// triggers' events need. nil (no reads) when the namespace has no trigger the write can fire.
    func captureTriggers(_ ns: String, parts: [(Path, Node)]) throws -> TriggerCapture? {
        guard let set = triggers[ns], !set.isEmpty else { return nil }
        var items: [(TriggerDefinition, [Node])] = []
        var read: [Path: Node] = [:]
        for (p, old) in parts { read[p] = old }
        var byPattern: [String: [Node]] = [:]
        for def in set.definitions {
            // Triggers on one pattern read the same scopes.
            if let before = byPattern[def.pattern.description] { items.append((def, before)); continue }
            let scopes = TriggerChanges.scopes(def.pattern, parts: parts.map(\.0))
            if scopes.isEmpty { continue }
            var before: [Node] = []
            for s in scopes {
                if let n = read[s] { before.append(n); continue }
                let n = try tables.readNode(t, ns, s)
                read[s] = n
                before.append(n)
            }
            byPattern[def.pattern.description] = before
            items.append((def, before))
        }
        return items.isEmpty ? nil : TriggerCapture(items: items)
    }

    /// After the write: each trigger's events go to its outbox (one row for the entry), unless
    /// its retention limit is reached: then they are counted as the trigger's gap. Triggers on
    /// the same pattern share the changes, and those that also fire on the same kinds share the
    /// encoded row: ten triggers on one path cost one diff and one encoding, not ten.
    func recordTriggers(_ e: LogEntry, _ capture: TriggerCapture, parts: [(Path, Node)]) throws {
        let ns = e.namespace
        let (authType, authID) = Self.triggerAuth(e.auth)
        var changesByPattern: [String: [(TriggerChange, before: JSON, after: JSON)]] = [:]
        var rowsByKinds: [String: [UInt8]] = [:]
        for (def, before) in capture.items {
            let patternKey = def.pattern.description
            let changes: [(TriggerChange, before: JSON, after: JSON)]
            if let c = changesByPattern[patternKey] { changes = c } else {
                let fresh = TriggerChanges.changes(def.pattern, parts: parts, before: before).map { ($0, $0.before.toJSON(), $0.after.toJSON()) }
                changesByPattern[patternKey] = fresh
                changes = fresh
            }
            let fired = changes.compactMap { c in def.firedType(for: c.0.kind).map { (c, $0) } }
            if fired.isEmpty { continue }
            let key = TriggerKeys.row(TriggerKeys.outboxPrefix(ns, def.name), e.index)
            // An onDisconnect run applies several writes at one index: their events share its row.
            let existing = try t.get(tables.meta, key)
            let rowKey = patternKey + "\u{0}" + def.on.map(\.rawValue).joined(separator: ",")
            let encoded: [UInt8]
            if existing == nil, let row = rowsByKinds[rowKey] { encoded = row } else {
                var events: [TriggerEvent] = []
                if let existing {
                    var r = ByteReader(existing)
                    events = try TriggerRecord.decode(&r)
                }
                for ((c, before, after), type) in fired {
                    events.append(TriggerEvent(index: e.index, seq: events.count, timestamp: e.timestamp, type: type, location: c.location,
                                               params: c.params, before: before, after: after, delta: c.delta,
                                               authType: authType, authID: authID))
                }
                var w = ByteWriter()
                TriggerRecord.encode(events, into: &w)
                encoded = w.bytes
                if existing == nil { rowsByKinds[rowKey] = encoded }
            }
            var state = try tables.triggerState(t, ns, def.name) ?? TriggerState()
            let oldBytes = UInt64(existing?.count ?? 0)
            let newRows = state.pending + (existing == nil ? 1 : 0)
            let newBytes = state.pendingBytes - oldBytes + UInt64(encoded.count)
            state.events += UInt64(fired.count)
            if def.feed {
                // A feed keeps the newest entries: the oldest go, and its cursor says which
                // (a consumer asking for older ones is answered 410 with it).
                try t.put(tables.meta, key, encoded)
                state.pending = newRows
                state.pendingBytes = newBytes
                let prefix = TriggerKeys.outboxPrefix(ns, def.name)
                while state.pending > UInt64(def.limits.retainEntries) || state.pendingBytes > UInt64(def.limits.retainBytes) {
                    var oldest: ([UInt8], Int)?
                    try t.scan(tables.meta, prefix: prefix) { k, v in oldest = (k, v.count); return false }
                    guard let (k, n) = oldest, k != key else { break }
                    try t.delete(tables.meta, k)
                    state.pending -= 1
                    state.pendingBytes -= UInt64(n)
                    state.cursor = TriggerKeys.index(ofRow: k)
                }
            } else if newRows > UInt64(def.limits.retainEntries) || newBytes > UInt64(def.limits.retainBytes) {
                // Never a silent skip: the gap is recorded and reported (status, metrics).
                state.skipped += UInt64(fired.count)
                if state.gapFirst == 0 { state.gapFirst = e.index }
                state.gapLast = e.index
            } else {
                try t.put(tables.meta, key, encoded)
                state.pending = newRows
                state.pendingBytes = newBytes
            }
            try tables.putTriggerState(t, ns, def.name, state)
        }
    }

    static func triggerAuth(_ auth: WriteAuth) -> (String, String?) {
        switch auth {
        case .admin: return ("admin", nil)
        case .user(nil): return ("unauthenticated", nil)
        case .user(let claims?):
            return ("app_user", claims["uid"]?.stringValue ?? claims["sub"]?.stringValue)
        }
    }

    /// Applies a trigger bookkeeping entry.
    mutating func applyTriggers(_ e: LogEntry, _ op: TriggerOperation) throws {
        guard e.auth == .admin else { throw StorageError.invalid(.invalidData("Only an admin may change triggers")) }
        let ns = e.namespace
        if case .define(let text) = op {
            let set: TriggerSet
            do { set = try TriggerSet(text: text) } catch { throw StorageError.invalid(.invalidData("triggers: \(error.reason)")) }
            let old = try tables.triggerSet(t, ns)
            for d in old.definitions where set.definition(named: d.name) == nil {
                try t.delete(tables.meta, TriggerKeys.state(ns, d.name))
                try t.deletePrefix(tables.meta, TriggerKeys.outboxPrefix(ns, d.name))
                try t.deletePrefix(tables.meta, TriggerKeys.deadPrefix(ns, d.name))
            }
            for d in set.definitions where try tables.triggerState(t, ns, d.name) == nil {
                // A new trigger fires for the entries after its definition.
                var s = TriggerState()
                s.cursor = e.index
                try tables.putTriggerState(t, ns, d.name, s)
            }
            if set.isEmpty { try t.delete(tables.meta, TriggerKeys.definitions(ns)) } else {
                try t.put(tables.meta, TriggerKeys.definitions(ns), Array(set.text.utf8))
            }
            triggers[ns] = set.isEmpty ? nil : set
            return
        }
        let name: String
        switch op {
        case .define: preconditionFailure("handled above")
        case .settle(let n, _, _), .halt(let n, _), .pause(let n), .resume(let n), .replay(let n, _): name = n
        }
        // Bookkeeping for a trigger since removed changes nothing.
        guard var state = try tables.triggerState(t, ns, name) else { return }
        let outbox = TriggerKeys.outboxPrefix(ns, name), dead = TriggerKeys.deadPrefix(ns, name)
        switch op {
        case .define: preconditionFailure("handled above")
        case .settle(_, let indexes, let reason):
            for i in indexes {
                let key = TriggerKeys.row(outbox, i)
                guard let row = try t.get(tables.meta, key) else { continue }
                try t.delete(tables.meta, key)
                state.pending -= 1
                state.pendingBytes -= UInt64(row.count)
                state.cursor = max(state.cursor, i)
                guard let reason else { continue }
                var w = ByteWriter()
                w.string(reason)
                w.bytes += row
                try t.put(tables.meta, TriggerKeys.row(dead, i), w.bytes)
                state.deadLetters += 1
                if state.deadLetters > TriggerState.maxDeadLetters {
                    var oldest: [UInt8]?
                    try t.scan(tables.meta, prefix: dead) { k, _ in oldest = k; return false }
                    if let oldest { try t.delete(tables.meta, oldest); state.deadLetters -= 1 }
                }
            }
        case .halt(_, let reason): state.halted = reason
        case .pause: state.paused = true
        case .resume: state.paused = false; state.halted = nil
        case .replay(_, let from):
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
                state.deadLetters -= 1
                let key = TriggerKeys.row(outbox, TriggerKeys.index(ofRow: k))
                if try t.get(tables.meta, key) != nil { continue }
                try t.put(tables.meta, key, row)
                state.pending += 1
                state.pendingBytes += UInt64(row.count)
            }
        }
        try tables.putTriggerState(t, ns, name, state)
    }
}
