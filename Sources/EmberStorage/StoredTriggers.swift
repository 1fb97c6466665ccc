import EmberCore

/// Where triggers live in the meta table, all under `triggers/` (so a snapshot carries them):
/// `d/<ns>` the definitions' text; `s/<ns>\0<name>` a trigger's state; `q/<ns>\0<name>\0<index>`
/// its outbox (one row per log entry: that entry's events, `TriggerEvent`s); `x/…` the same
/// for its dead letters (reason first).
enum TriggerKeys {
    static let prefix = Array("triggers/".utf8)
    static func definitions(_ ns: String) -> [UInt8] { prefix + Array("d/".utf8) + Array(ns.utf8) }
    static let definitionsPrefix = prefix + Array("d/".utf8)
    static func state(_ ns: String, _ name: String) -> [UInt8] { prefix + Array("s/".utf8) + Array(ns.utf8) + [0] + Array(name.utf8) }
    static func outboxPrefix(_ ns: String, _ name: String) -> [UInt8] { prefix + Array("q/".utf8) + Array(ns.utf8) + [0] + Array(name.utf8) + [0] }
    static func deadPrefix(_ ns: String, _ name: String) -> [UInt8] { prefix + Array("x/".utf8) + Array(ns.utf8) + [0] + Array(name.utf8) + [0] }
    /// One buffer of the row's size (one per matching write on every replica, its prefix kept).
    static func row(_ prefix: [UInt8], _ index: UInt64) -> [UInt8] {
        var w = ByteWriter(capacity: prefix.count + 8)
        w.bytes.append(contentsOf: prefix)
        w.u64(index)
        return w.bytes
    }
    static func index(ofRow key: [UInt8]) -> UInt64 {
        var r = ByteReader(Array(key.suffix(8)))
        return (try? r.u64()) ?? 0
    }
}

/// The stored form of a trigger's state. Format 2 adds the shared change records' fields;
/// a format-1 state (0.6.0) reads with them zero: its outbox rows are its own rows.
extension TriggerState {
    var encoded: [UInt8] {
        var w = ByteWriter(capacity: 144)
        w.u8(2)
        for v in [cursor, pending, pendingBytes, skipped, gapFirst, gapLast, deadLetters, events] { w.u64(v) }
        w.u8((paused ? 1 : 0) | (halted != nil ? 2 : 0))
        if let halted { w.string(halted) }
        for v in [group, doneRecords, doneBytes, eventsBase, keepThrough, keepRecords, keepBytes, keepEvents] { w.u64(v) }
        return w.bytes
    }

    /// The format-1 encoding (0.6.0): its snapshot layout (`TriggerLegacyLayout`) and the migration tests.
    var encodedV1: [UInt8] {
        var w = ByteWriter(capacity: 80)
        w.u8(1)
        for v in [cursor, pending, pendingBytes, skipped, gapFirst, gapLast, deadLetters, events] { w.u64(v) }
        w.u8((paused ? 1 : 0) | (halted != nil ? 2 : 0))
        if let halted { w.string(halted) }
        return w.bytes
    }

    init(decoding b: [UInt8]) throws(StorageError) {
        self.init()
        var r = ByteReader(b)
        let format = try r.u8()
        guard format == 1 || format == 2 else { throw .corrupt("trigger state format") }
        cursor = try r.u64(); pending = try r.u64(); pendingBytes = try r.u64(); skipped = try r.u64()
        gapFirst = try r.u64(); gapLast = try r.u64(); deadLetters = try r.u64(); events = try r.u64()
        let flags = try r.u8()
        paused = flags & 1 != 0
        halted = flags & 2 != 0 ? try r.string() : nil
        guard format == 2 else { return }
        group = try r.u64(); doneRecords = try r.u64(); doneBytes = try r.u64(); eventsBase = try r.u64()
        keepThrough = try r.u64(); keepRecords = try r.u64(); keepBytes = try r.u64(); keepEvents = try r.u64()
    }
}

/// One outbox row: an entry's events for one trigger.
enum TriggerRecord {
    static func encode(_ events: [TriggerEvent], into w: inout ByteWriter) {
        w.u8(1)
        w.varint(events.count)
        for e in events {
            w.u64(e.index); w.varint(e.seq); w.i64(e.timestamp)
            w.u8(e.type.code)
            w.path(e.location)
            encodeParams(e.params, into: &w)
            w.json(e.before); w.json(e.after); w.json(e.delta)
            w.string(e.authType)
            if let id = e.authID { w.u8(1); w.string(id) } else { w.u8(0) }
        }
    }

    /// An event's wildcard values, as `encode` writes them (the compact record's form too).
    static func encodeParams(_ params: [String: String], into w: inout ByteWriter) {
        w.varint(params.count)
        TriggerEvent.forEachParam(params) { k, v in w.string(k); w.string(v) }
    }

    static func decodeParams(_ r: inout ByteReader) throws(StorageError) -> [String: String] {
        let pn = try r.varint()
        guard pn <= Limits.maxPathDepth else { throw .corrupt("trigger params") }
        var params = [String: String](minimumCapacity: pn)
        for _ in 0..<pn { let key = try r.string(); params[key] = try r.string() }
        return params
    }

    static func decode(_ r: inout ByteReader) throws(StorageError) -> [TriggerEvent] {
        guard try r.u8() == 1 else { throw .corrupt("trigger record format") }
        let n = try r.varint()
        guard n <= r.bytes.count else { throw .corrupt("trigger record count") }
        var out: [TriggerEvent] = []
        for _ in 0..<n {
            let index = try r.u64(), seq = try r.varint(), ts = try r.i64()
            guard let kind = TriggerEventKind(code: try r.u8()) else { throw .corrupt("trigger event kind") }
            let location = try r.path()
            let params = try decodeParams(&r)
            let before = try r.json(), after = try r.json(), delta = try r.json()
            let authType = try r.string()
            let authID: String? = try r.u8() == 1 ? try r.string() : nil
            out.append(TriggerEvent(index: index, seq: seq, timestamp: ts, type: kind, location: location,
                                    params: params, before: before, after: after, delta: delta, authType: authType, authID: authID))
        }
        return out
    }
}

/// Trigger tables as the writer and the readers see them.
extension Tables {
    func triggerSet(_ t: Txn, _ ns: String) throws -> TriggerSet {
        guard let v = try t.get(meta, TriggerKeys.definitions(ns)) else { return .empty }
        do { return try TriggerSet(text: String(decoding: v, as: UTF8.self)) } catch {
            throw StorageError.corrupt("stored triggers of \(ns): \(error)")
        }
    }

    /// Every namespace's triggers (at open, and after a snapshot replaced the state).
    func allTriggerSets(_ t: Txn) throws -> [String: TriggerSet] {
        var out: [String: TriggerSet] = [:]
        let p = TriggerKeys.definitionsPrefix
        try t.scan(meta, prefix: p) { k, v in
            let ns = String(decoding: k.dropFirst(p.count), as: UTF8.self)
            do { out[ns] = try TriggerSet(text: String(decoding: v, as: UTF8.self)) } catch {
                throw StorageError.corrupt("stored triggers of \(ns): \(error)")
            }
            return true
        }
        return out
    }

    func triggerState(_ t: Txn, _ ns: String, _ name: String) throws -> TriggerState? {
        try t.get(meta, TriggerKeys.state(ns, name)).map { try TriggerState(decoding: $0) }
    }

    func putTriggerState(_ t: Txn, _ ns: String, _ name: String, _ s: TriggerState) throws {
        try t.put(meta, TriggerKeys.state(ns, name), s.encoded)
    }

    /// Outbox (or dead-letter) rows after `after`, at most `limit` rows, in log order.
    func triggerRows(_ t: Txn, prefix: [UInt8], after: UInt64?, limit: Int) throws -> [(index: UInt64, events: [TriggerEvent], reason: String?)] {
        var out: [(UInt64, [TriggerEvent], String?)] = []
        let start = after.map { TriggerKeys.row(prefix, $0 &+ 1) }
        if let after, after == .max { return [] }
        try t.scan(meta, prefix: prefix, startingAt: start) { k, v in
            guard k.count == prefix.count + 8 else { return true }
            var r = ByteReader(v)
            let reason: String? = prefix.starts(with: TriggerKeys.prefix + Array("x/".utf8)) ? try r.string() : nil
            out.append((TriggerKeys.index(ofRow: k), try TriggerRecord.decode(&r), reason))
            return out.count < limit
        }
        return out
    }
}
