/// Writes events' `TriggerEvent.writeSharedMembers` bytes one after another for one namespace,
/// keeping what consecutive events share: the namespace escaped once, an entry's time
/// formatted once for all its events (and for the entries of one millisecond), and each
/// location escaped once for the two members that name it (`subject` and `ref`). A lane
/// writing a POST of many events, or an apply serializing a group's events, spent a share of
/// its time per event escaping and formatting the same text again.
public struct TriggerMembersWriter {
    /// `instance`'s value: the namespace as a JSON string.
    private let instance: [UInt8]
    /// The last time written and its quoted text.
    private var stamp: Int64?
    private var time: [UInt8] = []
    /// Scratch: the current event's location, escaped (reused: no allocation per event).
    private var ref: [UInt8] = []

    public init(namespace: String) {
        var q: [UInt8] = []
        JSONWriter.writeString(namespace, into: &q)
        instance = q
        ref.reserveCapacity(64)
    }

    /// `e`'s shared members and the closing `}`: the bytes `writeSharedMembers` writes.
    public mutating func write(_ e: TriggerEvent, into out: inout [UInt8]) {
        if stamp != e.timestamp {
            time.removeAll(keepingCapacity: true)
            TriggerEvent.writeTime(millis: e.timestamp, into: &time)
            stamp = e.timestamp
        }
        ref.removeAll(keepingCapacity: true)
        for (k, key) in e.location.segments.enumerated() {
            if k > 0 { ref.append(0x2F) }
            JSONWriter.writeEscaped(key, into: &ref)
        }
        // The constant text between two values goes in one append (each append checks the
        // buffer's uniqueness and capacity: per piece, that was much of a busy leader's cost).
        Self.raw("\"id\":\"", into: &out)
        TriggerEvent.digits(e.index, into: &out); out.append(0x2D); TriggerEvent.digits(UInt64(e.seq), into: &out)
        Self.raw("\",\"type\":\"google.firebase.database.ref.v1.", into: &out)
        switch e.type {
        case .created: Self.raw("created", into: &out)
        case .updated: Self.raw("updated", into: &out)
        case .deleted: Self.raw("deleted", into: &out)
        case .written: Self.raw("written", into: &out)
        }
        Self.raw("\",\"time\":", into: &out)
        out.append(contentsOf: time)
        Self.raw(",\"subject\":\"refs/", into: &out)
        out.append(contentsOf: ref)
        Self.raw("\",\"datacontenttype\":\"application/json\",\"ref\":\"/", into: &out)
        out.append(contentsOf: ref)
        Self.raw("\",\"instance\":", into: &out)
        out.append(contentsOf: instance)
        Self.raw(",\"sequence\":\"", into: &out)
        TriggerEvent.digits(e.index, into: &out)
        Self.raw("\",\"params\":{", into: &out)
        var first = true
        TriggerEvent.forEachParam(e.params) { name, value in
            if !first { out.append(0x2C) }
            first = false
            JSONWriter.writeString(name, into: &out)
            out.append(0x3A)
            JSONWriter.writeString(value, into: &out)
        }
        Self.raw("},\"authtype\":", into: &out)
        JSONWriter.writeString(e.authType, into: &out)
        if let authID = e.authID {
            Self.raw(",\"authid\":", into: &out)
            JSONWriter.writeString(authID, into: &out)
        }
        Self.raw(",\"data\":{\"data\":", into: &out)
        JSONWriter.write(e.before, into: &out, pretty: false, indent: 0)
        Self.raw(",\"delta\":", into: &out)
        JSONWriter.write(e.delta, into: &out, pretty: false, indent: 0)
        Self.raw(",\"before\":", into: &out)
        JSONWriter.write(e.before, into: &out, pretty: false, indent: 0)
        Self.raw(",\"after\":", into: &out)
        JSONWriter.write(e.after, into: &out, pretty: false, indent: 0)
        Self.raw("}}", into: &out)
    }

    /// Constant text (no character JSON escapes) appended as it is.
    private static func raw(_ s: StaticString, into out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }
}
