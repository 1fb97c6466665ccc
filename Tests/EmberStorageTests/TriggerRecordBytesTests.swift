import EmberCore
import EmberTestSupport
import Testing
@testable import EmberStorage

/// A change record is written once per matching write on every replica, so its encoding skips
/// the joined location string, the sorted keys of a single param and the header copied in
/// front of the body: the bytes stay those of the format as first written (read by 0.7.0 and,
/// as own rows, by 0.6.0), checked here against that writing for seeded events.
@Suite struct TriggerRecordBytesTests {
    static let keys = ["a", "m1", "-K1", "q\"k", "é", "日本", "🔥", "x y", "1"]

    /// The record body as written before (`string(location.description)`, params by sorted key).
    static func reference(_ events: [TriggerEvent]) -> [UInt8] {
        var w = ByteWriter()
        w.u8(1)
        w.varint(events.count)
        for e in events {
            w.u64(e.index); w.varint(e.seq); w.i64(e.timestamp)
            w.u8(UInt8(TriggerEventKind.allCases.firstIndex(of: e.type)!))
            w.string(e.location.description)
            w.varint(e.params.count)
            for k in e.params.keys.sorted() { w.string(k); w.string(e.params[k]!) }
            w.json(e.before); w.json(e.after); w.json(e.delta)
            w.string(e.authType)
            if let id = e.authID { w.u8(1); w.string(id) } else { w.u8(0) }
        }
        return w.bytes
    }

    @Test(arguments: [1, 2, 3]) func recordsAreTheFormatsBytes(seed: UInt64) throws {
        var r = SplitMix64(seed: seed)
        for round in 0..<500 {
            var events: [TriggerEvent] = []
            for seq in 0..<(r.below(3) + 1) {
                let location = Path(validated: (0..<r.below(4)).map { _ in Self.keys[r.below(Self.keys.count)] })
                var params: [String: String] = [:]
                for _ in 0..<r.below(4) { params["p\(r.below(4))"] = Self.keys[r.below(Self.keys.count)] }
                let values: [JSON] = [.null, .int(Int64(r.below(100))), .string(Self.keys[r.below(Self.keys.count)]),
                                      .object(["b": .bool(true), "a": .double(1.5)])]
                events.append(TriggerEvent(index: r.next() >> 1, seq: seq, timestamp: Int64(r.below(2_000_000_000)) * 1_000,
                                           type: TriggerEventKind.allCases[r.below(4)], location: location, params: params,
                                           before: values[r.below(4)], after: values[r.below(4)], delta: values[r.below(4)],
                                           authType: "app_user", authID: r.below(2) == 0 ? nil : Self.keys[r.below(Self.keys.count)]))
            }
            var w = ByteWriter()
            TriggerRecord.encode(events, into: &w)
            #expect(w.bytes == Self.reference(events), "round \(round)")
            var rd = ByteReader(w.bytes)
            #expect(try TriggerRecord.decode(&rd) == events)
            // A shared record: the header with the running counts, then the same body.
            let last = TriggerChangeLog.Position(index: UInt64(round), records: UInt64(r.below(1_000)), bytes: UInt64(r.below(1 << 20)),
                                                 events: UInt64(r.below(5_000)))
            let (record, at) = TriggerChangeLog.encodeRecord(events, after: last, index: UInt64(round) + 1)
            let body = Self.reference(events)
            #expect(at == TriggerChangeLog.Position(index: UInt64(round) + 1, records: last.records + 1,
                                                    bytes: last.bytes + UInt64(TriggerChangeLog.headerBytes + body.count),
                                                    events: last.events + UInt64(events.count)))
            #expect(record == TriggerChangeLog.header(at) + body)
            #expect(try TriggerChangeLog.position(at.index, record) == at)
            #expect(try TriggerChangeLog.events(record) == events)
        }
    }
}

