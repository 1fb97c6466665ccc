import EmberCore

/// A trigger group's change record kept compact while its log entry is in the store's log
/// (issue 36): per event only what the entry and the group's pattern do not say. The rest of
/// the full record (`TriggerRecord`) is the entry's: its timestamp, who wrote it, and the value
/// the write gave the location, which is both `after` and `delta`; `before` is null (the
/// location was created). So a write costs every member a few bytes instead of its value
/// encoded twice.
///
/// Only such events are stored so (`fits`): a location a write created and gave its whole
/// value (a part at or above it). Any other record of the group's stream is full.
///
/// Two forms. `format` (storage format 6, what this build writes): the header's counts as
/// varints, the pattern's wildcards once (segment and name), then per event its type and the
/// keys of its location below the entry's path (none for a set creating the location itself):
/// the location is the entry's path plus those, its wildcard values the location's keys at the
/// wildcards. For the common `/messages/{id}` creation that is about 20 bytes against 75 in
/// `locationsFormat` (storage format 5: a fixed header, then per event its type, location and
/// wildcard values), which this build still reads (an upgraded member's rows) and writes only
/// where a location lies outside its entry's path (none does: kept as the general form).
///
/// A compact record's header holds exactly the running counts its full record would have
/// (`fullBodySize`), so positions, retention limits and every member's decisions are the same
/// whichever form a member stores (members store their own records; each decides alone), and
/// `expand` turns it into that full record byte for byte. It is expanded where its entry stops
/// being at hand: before log compaction deletes the entry (`expandCompacted`), and in a
/// snapshot stream (`fullRows`: the installing member has no log before it, and an older build
/// reads full records only).
enum TriggerCompactRecord {
    /// Relative to the entry's path and the pattern (storage format 6).
    static let format: UInt8 = 5
    /// Locations and wildcard values written out (storage format 5).
    static let locationsFormat: UInt8 = 4

    struct Event: Equatable {
        var type: TriggerEventKind
        var location: Path
        var params: [String: String]
    }

    /// Whether `c` may go compact: created, and its value (`delta` too) rebuilt from the entry.
    static func fits(_ c: TriggerChange) -> Bool { c.kind == .created && c.deltaIsAfter }

    /// Whether the entry's kind is one `expand` rebuilds values from (a set or an update).
    static func rebuildable(_ op: WriteOperation) -> Bool {
        switch op {
        case .set, .update, .updateText: return true
        case .noop, .setRules, .onDisconnect, .archived, .triggers: return false
        }
    }

    // MARK: - Writing

    /// The compact record of `events` (`after[k]` the k-th one's value after the write; all
    /// locations of `pattern`), with the header its full record would have after `last`: in
    /// `format` when every location lies at or below the entry's path, else (or when asked:
    /// an older build's rows, for tests) in `locationsFormat`.
    static func encode(_ events: [Event], after values: [Node], _ pattern: TriggerPattern, entry e: LogEntry,
                       after last: TriggerChangeLog.Position, format wanted: UInt8 = format) -> (bytes: [UInt8], at: TriggerChangeLog.Position) {
        precondition(events.count == values.count, "one value per event")
        let (authType, authID) = Applier.triggerAuth(e.auth)
        let body = fullBodySize(events, values, authType: authType, authID: authID)
        if wanted == format, let base = basePath(e.operation), events.allSatisfy({ base.contains($0.location) }) {
            assert(events.allSatisfy { pattern.match($0.location) == $0.params }, "wildcard values are the location's keys")
            return record(format, events: events.count, fullBody: body, entry: e, after: last) { w in
                writeWildcards(pattern, into: &w)
                w.varint(events.count)
                for ev in events {
                    w.u8(ev.type.code)
                    w.varint(ev.location.count - base.count)
                    for key in ev.location.segments.dropFirst(base.count) { w.string(key) }
                }
            }
        }
        return record(locationsFormat, events: events.count, fullBody: body, entry: e, after: last) { w in
            w.varint(events.count)
            for ev in events {
                w.u8(ev.type.code)
                w.path(ev.location)
                TriggerRecord.encodeParams(ev.params, into: &w)
            }
        }
    }

    /// `encode` of the one event of a set that created `location`, a location of `pattern`,
    /// with `value` (`Applier.recordCreated`): the set's own path, so no key of it is written;
    /// its params' size counted from the location's keys at the pattern's wildcards, none built.
    static func encodeCreated(_ type: TriggerEventKind, at location: Path, _ pattern: TriggerPattern, value: Node, entry e: LogEntry,
                              after last: TriggerChangeLog.Position) -> (bytes: [UInt8], at: TriggerChangeLog.Position) {
        assert(pattern.match(location) != nil, "a location of the pattern")
        assert(basePath(e.operation) == location, "a set at the location")
        let (authType, authID) = Applier.triggerAuth(e.auth)
        var params = LogEntry.varintSize(pattern.wildcardOrder.count)
        for i in pattern.wildcardOrder { params += LogEntry.stringSize(pattern.wildcardName(i)) + LogEntry.stringSize(location.segments[i]) }
        let body = 1 + LogEntry.varintSize(1)
            + eventBodySize(seq: 0, location: location, paramsSize: params, value: value, authSize: authSize(authType, authID))
        return record(format, events: 1, fullBody: body, entry: e, after: last) { w in
            writeWildcards(pattern, into: &w)
            w.varint(1)
            w.u8(type.code)
            w.varint(0)
        }
    }

    /// The path an entry's parts are under (a set's, an update's): what `format` locations are relative to.
    static func basePath(_ op: WriteOperation) -> Path? {
        switch op {
        case .set(let path, _, _), .update(let path, _, _), .updateText(let path, _, _): return path
        case .noop, .setRules, .onDisconnect, .archived, .triggers: return nil
        }
    }

    /// The pattern's wildcards in `TriggerPattern.wildcardOrder`: each one's segment and name.
    private static func writeWildcards(_ pattern: TriggerPattern, into w: inout ByteWriter) {
        w.varint(pattern.wildcardOrder.count)
        for i in pattern.wildcardOrder {
            w.varint(i)
            w.string(pattern.wildcardName(i))
        }
    }

    /// A compact record of `events` events in `form`, written by `write`, behind the header of
    /// a full record of `fullBody` bytes after `last` (known before the events are written: the
    /// header goes first, no room left for it and filled in after).
    private static func record(_ form: UInt8, events: Int, fullBody: Int, entry e: LogEntry, after last: TriggerChangeLog.Position,
                               _ write: (inout ByteWriter) -> Void) -> (bytes: [UInt8], at: TriggerChangeLog.Position) {
        let at = TriggerChangeLog.Position(index: e.index, records: last.records + 1,
                                           bytes: last.bytes + UInt64(TriggerChangeLog.headerBytes + fullBody),
                                           events: last.events + UInt64(events))
        var w = ByteWriter(capacity: form == format ? 32 : 96)
        if form == format {
            w.u8(format)
            w.uvarint(at.records); w.uvarint(at.bytes); w.uvarint(at.events)
        } else {
            TriggerChangeLog.writeHeader(at, format: form, into: &w)
        }
        write(&w)
        return (w.bytes, at)
    }

    /// The bytes `TriggerRecord.encode` writes for these events with `before` null and `after`
    /// and `delta` the values' JSON, counted without building it.
    static func fullBodySize(_ events: [Event], _ values: [Node], authType: String, authID: String?) -> Int {
        var n = 1 + LogEntry.varintSize(events.count)
        let auth = authSize(authType, authID)
        for (k, ev) in events.enumerated() {
            var params = LogEntry.varintSize(ev.params.count)
            for (key, value) in ev.params { params += LogEntry.stringSize(key) + LogEntry.stringSize(value) }
            n += eventBodySize(seq: k, location: ev.location, paramsSize: params, value: values[k], authSize: auth)
        }
        return n
    }

    static func authSize(_ authType: String, _ authID: String?) -> Int {
        LogEntry.stringSize(authType) + 1 + (authID.map(LogEntry.stringSize) ?? 0)
    }

    /// One event's bytes in a full record (its params' bytes given).
    static func eventBodySize(seq: Int, location: Path, paramsSize: Int, value: Node, authSize: Int) -> Int {
        // index, seq, timestamp, type
        var n = 8 + LogEntry.varintSize(seq) + 8 + 1
        var path = location.segments.isEmpty ? 1 : location.count
        for s in location.segments { path += s.utf8.count }
        n += LogEntry.varintSize(path) + path
        n += paramsSize
        // before (null), after and delta (the same JSON)
        n += 1 + 2 * jsonSize(value)
        return n + authSize
    }

    /// The bytes `ByteWriter.json(node.toJSON())` writes.
    static func jsonSize(_ node: Node) -> Int {
        if let leaf = node.leaf {
            switch leaf {
            case .bool: return 1
            case .int, .double: return 9
            case .string(let s): return 1 + LogEntry.stringSize(s)
            }
        }
        if node.children.isEmpty { return 1 }
        // `Node.toJSON`'s array form: every key an index and the largest below twice the count.
        var maxKey = -1
        for key in node.children.keys {
            guard let i = Node.arrayIndex(key) else { maxKey = -2; break }
            maxKey = max(maxKey, i)
        }
        if maxKey >= 0 && maxKey < 2 * node.children.count {
            // Missing indexes are nulls (one byte each).
            var n = 1 + LogEntry.varintSize(maxKey + 1) + (maxKey + 1 - node.children.count)
            for (_, child) in node.children { n += jsonSize(child) }
            return n
        }
        var n = 1 + LogEntry.varintSize(node.children.count)
        for (key, child) in node.children { n += LogEntry.stringSize(key) + jsonSize(child) }
        return n
    }

    // MARK: - Reading

    static func isCompact(_ v: [UInt8]) -> Bool { v.first == format || v.first == locationsFormat }

    /// The running counts in a compact record's header (either form).
    static func position(_ index: UInt64, _ v: [UInt8]) throws(StorageError) -> TriggerChangeLog.Position {
        var r = ByteReader(v)
        let f = try r.u8()
        if f == format { return TriggerChangeLog.Position(index: index, records: try r.uvarint(), bytes: try r.uvarint(), events: try r.uvarint()) }
        guard f == locationsFormat else { throw .corrupt("compact trigger record format") }
        return TriggerChangeLog.Position(index: index, records: try r.u64(), bytes: try r.u64(), events: try r.u64())
    }

    /// The events of compact record `v` (either form) of an entry whose parts are under `base`.
    static func decode(_ v: [UInt8], base: Path) throws(StorageError) -> [Event] {
        var r = ByteReader(v)
        let relative = try r.u8() == format
        var wildcards: [(segment: Int, name: String)] = []
        if relative {
            _ = try r.uvarint(); _ = try r.uvarint(); _ = try r.uvarint()
            let wn = try r.varint()
            guard wn <= Limits.maxPathDepth else { throw .corrupt("compact trigger record wildcards") }
            wildcards.reserveCapacity(wn)
            for _ in 0..<wn { wildcards.append((try r.varint(), try r.string())) }
        } else {
            guard v.first == locationsFormat else { throw .corrupt("compact trigger record format") }
            r.i = TriggerChangeLog.headerBytes
        }
        let n = try r.varint()
        guard n <= r.bytes.count else { throw .corrupt("compact trigger record count") }
        var out: [Event] = []
        out.reserveCapacity(n)
        for _ in 0..<n {
            guard let type = TriggerEventKind(code: try r.u8()) else { throw .corrupt("trigger event kind") }
            guard relative else {
                let location = try r.path()
                out.append(Event(type: type, location: location, params: try TriggerRecord.decodeParams(&r)))
                continue
            }
            let below = try r.varint()
            guard base.count + below <= Limits.maxPathDepth else { throw .corrupt("compact trigger record location") }
            var keys = base.segments
            for _ in 0..<below { keys.append(try r.string()) }
            let location: Path
            do { location = try Path(validating: keys) } catch { throw .corrupt("compact trigger record location") }
            var params = [String: String](minimumCapacity: wildcards.count)
            for (segment, name) in wildcards {
                guard segment < keys.count else { throw .corrupt("compact trigger record wildcard") }
                params[name] = keys[segment]
            }
            out.append(Event(type: type, location: location, params: params))
        }
        return out
    }

    /// The full events of the compact record `v` of entry `e`.
    static func events(_ v: [UInt8], entry e: LogEntry) throws(StorageError) -> [TriggerEvent] {
        guard let base = basePath(e.operation) else { throw .corrupt("compact trigger record of an entry that is not a write") }
        let (authType, authID) = Applier.triggerAuth(e.auth)
        var out: [TriggerEvent] = []
        for (k, ev) in try decode(v, base: base).enumerated() {
            let after = try value(at: ev.location, in: e).toJSON()
            out.append(TriggerEvent(index: e.index, seq: k, timestamp: e.timestamp, type: ev.type, location: ev.location,
                                    params: ev.params, before: .null, after: after, delta: after, authType: authType, authID: authID))
        }
        return out
    }

    /// The full record (format `TriggerChangeLog.recordFormat`) the compact record `v` of
    /// entry `e` stands for: the same header counts, the events `events` rebuilds.
    static func expand(_ v: [UInt8], entry e: LogEntry) throws(StorageError) -> [UInt8] {
        let at = try TriggerChangeLog.position(e.index, v)
        var w = ByteWriter(capacity: 256)
        w.bytes.append(contentsOf: TriggerChangeLog.header(at))
        TriggerRecord.encode(try events(v, entry: e), into: &w)
        return w.bytes
    }

    /// The value entry `e` gave `location`, which lies at or below one of its parts (what
    /// `fits` holds for): that part's JSON below it, its server values resolved as the apply
    /// did (a placeholder inside a created location met nothing there).
    static func value(at location: Path, in e: LogEntry) throws(StorageError) -> Node {
        let parts: [(Path, JSON)]
        switch e.operation {
        case .set(let path, let json, _): parts = [(path, json)]
        case .update(let path, let values, _): parts = values.map { (path.appending($0.0), $0.1) }
        case .updateText(let path, let text, _):
            // The part's node from its text (no server value in it), then the node below it.
            guard let i = text.parts.firstIndex(where: { path.appending($0.path).contains(location) }) else {
                throw .corrupt("compact trigger record's location outside its entry")
            }
            let at = path.appending(text.parts[i].path)
            var node: Node
            do throws(EmberError) { node = try text.node(i, depth: at.count) } catch {
                throw .corrupt("compact trigger record's value: \(error)")
            }
            for key in location.segments.dropFirst(at.count) { node = node.child(key) }
            return node
        default: throw .corrupt("compact trigger record of an entry that is not a write")
        }
        guard let (path, json) = parts.first(where: { $0.0.contains(location) }) else {
            throw .corrupt("compact trigger record's location outside its entry")
        }
        var sub = json
        for key in location.segments.dropFirst(path.count) {
            guard let next = child(sub, key) else { return .empty }
            sub = next
        }
        do {
            let resolved = ServerValues.containsPlaceholder(sub) ? try ServerValues.resolve(sub, existing: .empty, now: e.timestamp) : sub
            return try Node(json: resolved, depth: location.count)
        } catch {
            throw .corrupt("compact trigger record's value: \(error)")
        }
    }

    /// The JSON `Node(json:)` makes child `key` of (nil: none).
    static func child(_ json: JSON, _ key: String) -> JSON? {
        switch json {
        case .object(let o):
            if Node.hasDotKey(o) {
                if o[".sv"] != nil { return nil }
                if let v = o[".value"] { return child(v, key) }
            }
            return o[key]
        case .array(let a):
            guard let i = Node.arrayIndex(key), i < a.count else { return nil }
            return a[i]
        default:
            return nil
        }
    }
}
