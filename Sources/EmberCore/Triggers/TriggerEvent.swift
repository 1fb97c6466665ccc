/// One event a trigger delivers, as kept in its outbox until delivered: a change of one
/// location by one committed log entry, and who wrote it.
public struct TriggerEvent: Sendable, Equatable {
    /// The log entry's index, and the event's place among the entry's events for this trigger.
    public var index: UInt64
    public var seq: Int
    /// The entry's timestamp (ms since 1970).
    public var timestamp: Int64
    public var type: TriggerEventKind
    public var location: Path
    public var params: [String: String]
    public var before: JSON
    public var after: JSON
    public var delta: JSON
    /// Firebase's `authtype`: `admin`, `app_user` or `unauthenticated`; `authid` the user's id.
    public var authType: String
    public var authID: String?
    /// `writeSharedMembers`' bytes for the namespace of the record it came from, when the
    /// apply serialized them once for all the triggers of the event's group (`Applier.recordShared`):
    /// each of the group's lanes then puts them behind its head as they are, with no lookup or
    /// copy per event in `TriggerBodyCache`. Derived from the fields above: not compared.
    public var sharedMembers: [UInt8]?

    public init(index: UInt64, seq: Int, timestamp: Int64, type: TriggerEventKind, location: Path, params: [String: String],
                before: JSON, after: JSON, delta: JSON, authType: String, authID: String?) {
        self.index = index
        self.seq = seq
        self.timestamp = timestamp
        self.type = type
        self.location = location
        self.params = params
        self.before = before
        self.after = after
        self.delta = delta
        self.authType = authType
        self.authID = authID
    }

    public static func == (a: TriggerEvent, b: TriggerEvent) -> Bool {
        a.index == b.index && a.seq == b.seq && a.timestamp == b.timestamp && a.type == b.type && a.location == b.location
            && a.params == b.params && a.before == b.before && a.after == b.after && a.delta == b.delta && a.authType == b.authType
            && a.authID == b.authID
    }

    /// The event with `sharedMembers` made for `namespace`.
    public func withSharedMembers(namespace: String) -> TriggerEvent {
        var e = self
        var bytes: [UInt8] = []
        bytes.reserveCapacity(384)
        writeSharedMembers(namespace: namespace, into: &bytes)
        e.sharedMembers = bytes
        return e
    }

    /// Stable across retries, failovers and restarts: the entry's index and the event's place in it.
    public var id: String { "\(index)-\(seq)" }

    /// The CloudEvents 1.0 structured form, with Firebase's attribute names: `subject`
    /// `refs/<path>`, `ref`, `instance`, `params`, `authtype`/`authid`; `data` holds Firebase's
    /// `data` (the value before) and `delta`, plus `before` and `after` whole.
    public func cloudEvent(namespace: String, trigger: String) -> JSON {
        let ref = location.segments.joined(separator: "/")
        var o: KeyMap<JSON> = [
            "specversion": .string("1.0"),
            "id": .string(id),
            "source": .string("//ember/namespaces/\(namespace)/triggers/\(trigger)"),
            "type": .string(type.cloudEventType),
            "time": .string(Self.rfc3339(millis: timestamp)),
            "subject": .string("refs/" + ref),
            "datacontenttype": .string("application/json"),
            "ref": .string("/" + ref),
            "instance": .string(namespace),
            "trigger": .string(trigger),
            "sequence": .string(String(index)),
            "params": .object(KeyMap(uniqueKeysWithValues: params.map { ($0.key, JSON.string($0.value)) })),
            "authtype": .string(authType),
            "data": .object(["data": before, "delta": delta, "before": before, "after": after]),
        ]
        if let authID { o["authid"] = .string(authID) }
        return .object(o)
    }

    /// `cloudEvent` serialized straight to bytes (compact JSON, the members in a fixed order),
    /// without building the tree and sorting its keys: the worker serializes every event it
    /// POSTs, and building and sorting the envelope was most of a busy leader's delivery cost.
    /// The members naming the trigger come first; the rest (`writeSharedMembers`) are the same
    /// for every trigger of a group, so the worker serializes them once for all of them.
    public func writeCloudEvent(namespace: String, trigger: String, into out: inout [UInt8]) {
        Self.writeHead(source: Self.source(namespace, trigger), trigger: trigger, into: &out)
        writeSharedMembers(namespace: namespace, into: &out)
    }

    static func source(_ namespace: String, _ trigger: String) -> String { "//ember/namespaces/\(namespace)/triggers/\(trigger)" }

    private static func key(_ k: StaticString, into out: inout [UInt8]) {
        out.append(0x22)
        out.append(contentsOf: UnsafeBufferPointer(start: k.utf8Start, count: k.utf8CodeUnitCount))
        out.append(0x22); out.append(0x3A)
    }

    private static func member(_ k: StaticString, _ v: String, comma: Bool = true, into out: inout [UInt8]) {
        key(k, into: &out)
        JSONWriter.writeString(v, into: &out)
        if comma { out.append(0x2C) }
    }

    /// `{` and the members that name the trigger, each followed by a comma.
    static func writeHead(source: String, trigger: String, into out: inout [UInt8]) {
        out.append(0x7B)
        member("specversion", "1.0", into: &out)
        member("source", source, into: &out)
        member("trigger", trigger, into: &out)
    }

    /// Every other member, and the closing `}`. Written straight as bytes: the id, the
    /// sequence and the time as digits, the location's keys escaped one by one (no joined
    /// path, interpolated id or formatted time per event: most of what a busy leader spent
    /// per event it delivers). The same bytes as each member's string written whole. Many
    /// events in a row: `TriggerMembersWriter`, which keeps what they share.
    public func writeSharedMembers(namespace: String, into out: inout [UInt8]) {
        var w = TriggerMembersWriter(namespace: namespace)
        w.write(self, into: &out)
    }

    /// `params` by key (`String` order), as the stored record and the CloudEvent list them:
    /// one or two (most patterns) compared in place, more through a sorted array of keys.
    public static func forEachParam(_ params: [String: String], _ body: (String, String) -> Void) {
        switch params.count {
        case 0:
            return
        case 1:
            let only = params.first!
            body(only.key, only.value)
        case 2:
            var it = params.makeIterator()
            let a = it.next()!, b = it.next()!
            if b.key < a.key { body(b.key, b.value); body(a.key, a.value) } else { body(a.key, a.value); body(b.key, b.value) }
        default:
            for k in params.keys.sorted() { body(k, params[k]!) }
        }
    }

    /// `v` in decimal, as `String(v)`.
    static func digits(_ v: UInt64, into out: inout [UInt8]) {
        if v < 10 { out.append(0x30 + UInt8(v)); return }
        var buf: (UInt64, UInt64, UInt64) = (0, 0, 0)
        var n = 0
        var x = v
        withUnsafeMutableBytes(of: &buf) { b in
            while x > 0 { b[23 - n] = 0x30 + UInt8(x % 10); x /= 10; n += 1 }
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: b[(24 - n)...]))
        }
    }

    /// `v` (0 ≤ v) in decimal, left-padded with zeros to `width`.
    static func padded(_ v: Int64, _ width: Int, into out: inout [UInt8]) {
        var len = 1, x = v
        while x >= 10 { x /= 10; len += 1 }
        for _ in len..<max(len, width) { out.append(0x30) }
        digits(UInt64(v), into: &out)
    }

    /// `rfc3339(millis:)` quoted, written as digits for years 0 to 9999 (every date a log entry
    /// carries); any other through the string.
    static func writeTime(millis: Int64, into out: inout [UInt8]) {
        guard millis >= 0, millis < 253_402_300_800_000 else {
            JSONWriter.writeString(rfc3339(millis: millis), into: &out)
            return
        }
        let c = civil(millis: millis)
        out.append(0x22)
        padded(c.y, 4, into: &out); out.append(0x2D); padded(c.m, 2, into: &out); out.append(0x2D); padded(c.d, 2, into: &out)
        out.append(0x54)
        padded(c.sod / 3600, 2, into: &out); out.append(0x3A); padded(c.sod % 3600 / 60, 2, into: &out); out.append(0x3A)
        padded(c.sod % 60, 2, into: &out); out.append(0x2E); padded(c.ms, 3, into: &out)
        out.append(0x5A); out.append(0x22)
    }

    /// The POST body of `events`: one CloudEvent, or (`batch`) a JSON array of them.
    public static func cloudEventBody(_ events: [TriggerEvent], namespace: String, trigger: String, batch: Bool) -> [UInt8] {
        cloudEventBody(events, namespace: namespace, head: head(namespace: namespace, trigger: trigger), batch: batch)
    }

    /// `cloudEventBody` behind a trigger's `head`, written into one buffer (no array per event).
    public static func cloudEventBody(_ events: [TriggerEvent], namespace: String, head: [UInt8], batch: Bool) -> [UInt8] {
        guard batch else {
            guard let first = events.first else { return Array("null".utf8) }
            var out = head
            first.writeSharedMembers(namespace: namespace, into: &out)
            return out
        }
        var out: [UInt8] = []
        out.reserveCapacity(2 + events.count * (head.count + 384))
        out.append(0x5B)
        for (k, e) in events.enumerated() {
            if k > 0 { out.append(0x2C) }
            out.append(contentsOf: head)
            e.writeSharedMembers(namespace: namespace, into: &out)
        }
        out.append(0x5D)
        return out
    }

    /// The bytes every event of one trigger starts with (`{` and the members naming it): made
    /// once per trigger, copied in front of each event's shared members.
    public static func head(namespace: String, trigger: String) -> [UInt8] {
        var out: [UInt8] = []
        writeHead(source: source(namespace, trigger), trigger: trigger, into: &out)
        return out
    }

    /// The POST body from a trigger's `head` and each event's `writeSharedMembers` bytes
    /// (serialized once for a group's triggers): one CloudEvent, or (`batch`) a JSON array.
    public static func cloudEventBody(head: [UInt8], shared: [[UInt8]], batch: Bool) -> [UInt8] {
        if !batch {
            guard let first = shared.first else { return Array("null".utf8) }
            return head + first
        }
        var out: [UInt8] = []
        out.reserveCapacity(2 + shared.reduce(0) { $0 + head.count + 1 + $1.count })
        out.append(0x5B)
        for (k, s) in shared.enumerated() {
            if k > 0 { out.append(0x2C) }
            out.append(contentsOf: head)
            out.append(contentsOf: s)
        }
        out.append(0x5D)
        return out
    }

    /// A batch's POST body from a trigger's `head` and its events' shared members concatenated
    /// in `joined` (event k's end at `ends[k]`): the bytes `cloudEventBody(head:shared:batch:
    /// true)` makes from them one by one.
    public static func cloudEventBody(head: [UInt8], joined: [UInt8], ends: [Int]) -> [UInt8] {
        precondition(ends.last ?? 0 == joined.count, "the ends cover the joined members")
        var out: [UInt8] = []
        out.reserveCapacity(2 + ends.count * (head.count + 1) + joined.count)
        out.append(0x5B)
        joined.withUnsafeBufferPointer { j in
            var start = 0
            for (k, end) in ends.enumerated() {
                if k > 0 { out.append(0x2C) }
                out.append(contentsOf: head)
                out.append(contentsOf: UnsafeBufferPointer(rebasing: j[start..<end]))
                start = end
            }
        }
        out.append(0x5D)
        return out
    }

    /// `2026-11-28T20:42:57.123Z` (UTC; days to civil date after H. Hinnant's published method).
    public static func rfc3339(millis: Int64) -> String {
        let (y, m, d, sod, ms) = civil(millis: millis)
        func pad(_ v: Int64, _ n: Int) -> String {
            let s = String(v)
            return s.utf8.count >= n ? s : String(repeating: "0", count: n - s.utf8.count) + s
        }
        return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(sod / 3600, 2)):\(pad(sod % 3600 / 60, 2)):\(pad(sod % 60, 2)).\(pad(ms, 3))Z"
    }

    /// Year, month, day, second of the day and millisecond of `millis` (UTC).
    static func civil(millis: Int64) -> (y: Int64, m: Int64, d: Int64, sod: Int64, ms: Int64) {
        let ms = ((millis % 1000) + 1000) % 1000
        let secs = (millis - ms) / 1000
        let days = secs >= 0 ? secs / 86_400 : (secs - 86_399) / 86_400
        let sod = secs - days * 86_400
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        return (y, m, d, sod, ms)
    }
}
