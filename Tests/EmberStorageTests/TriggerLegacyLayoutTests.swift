import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// A snapshot for a member of 0.6.0 (`legacyTriggers`): trigger state in the layout 0.6.0 reads —
/// format-1 states, each trigger's undelivered records as its own outbox rows, no shared records —
/// and the same deliveries ahead once installed (this build migrates it like a 0.6.0 stream).
@Suite struct TriggerLegacyLayoutTests {
    typealias T = TriggerSharedRecordTests

    /// The `triggers/` rows of a snapshot stream, by key.
    func triggerRows(_ chunks: [[UInt8]]) throws -> [[UInt8]: [UInt8]] {
        var out: [[UInt8]: [UInt8]] = [:]
        for (tag, k, v) in try snapshotRecords(chunks) where tag == 5 && k.starts(with: TriggerKeys.prefix) { out[k] = v }
        return out
    }

    func chunks(_ s: EmberStore, legacy: Bool) throws -> [[UInt8]] {
        var out: [[UInt8]] = []
        try s.snapshot(maxChunkBytes: 512, legacyTriggers: legacy) { out.append($0) }
        return out
    }

    /// What each trigger has left to deliver: indexes and event ids, in order.
    func outboxes(_ s: EmberStore, _ names: [String]) throws -> [String: [String]] {
        var out: [String: [String]] = [:]
        for n in names {
            out[n] = try s.triggerOutbox(namespace: "t", trigger: n, after: nil, limit: 1_000).flatMap { row in
                row.events.map { "\(row.index):\($0.id):\($0.location):\($0.after)" }
            }
        }
        return out
    }

    @Test func aLegacySnapshotCarriesEveryUndeliveredEventAsOwnRowsInFormatOne() async throws {
        let s = try openStore()
        let names = ["a", "b", "c", "small"]
        try await T().op(s, .define(text: T.defs([("a", T.trigger("/m/{id}")), ("b", T.trigger("/m/{id}")),
                                                  ("c", T.trigger("/m/{id}", on: "deleted")),
                                                  ("small", T.trigger("/m/{id}", on: "created", extra: #", "retainEntries": 2"#))])))
        let set = try s.triggerSet(namespace: "t")
        var ix: [UInt64] = []
        for i in 0..<6 { ix.append(try await s.set("/m/k\(i)", #"{"v": \#(i)}"#).index) }
        ix.append(try await s.set("/m/k0", "null").index)
        let group = set.definitions[0].group
        try await T().op(s, .advance([TriggerCursor(name: "a", group: group, through: ix[3], rows: [])]))
        let want = try outboxes(s, names)
        let states = try Dictionary(uniqueKeysWithValues: names.map { ($0, try T().state(s, $0)) })
        #expect(want["a"]?.count == 3 && want["b"]?.count == 7 && want["c"]?.count == 1)
        #expect(states["small"]?.behind == true, "past its retention limit: its gap must travel too")

        // The current layout keeps shared records; the legacy one none, and states in format 1.
        let current = try triggerRows(try chunks(s, legacy: false))
        #expect(current.keys.contains { $0.starts(with: TriggerChangeLog.recordsPrefix("t", group)) })
        let legacy = try triggerRows(try chunks(s, legacy: true))
        #expect(!legacy.keys.contains { k in TriggerLegacyLayout.sharedPrefixes.contains { k.starts(with: $0) } })
        for n in names {
            let v = try #require(legacy[TriggerKeys.state("t", n)])
            // 0.6.0 reads format 1 only, and exactly its fields.
            #expect(v.first == 1)
            let st = try TriggerState(decoding: v)
            #expect(v.count == st.encodedV1.count)
            let folded = try #require(states[n])
            #expect(st.cursor == folded.cursor && st.pending == folded.pending && st.events == folded.events)
            #expect(st.skipped == folded.skipped && st.gapFirst == folded.gapFirst && st.gapLast == folded.gapLast)
            // Its own rows hold exactly what it has left to deliver, decoded as 0.6.0 decodes them.
            let prefix = TriggerKeys.outboxPrefix("t", n)
            var own: [String] = []
            for k in legacy.keys.filter({ $0.starts(with: prefix) }).sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                var r = ByteReader(legacy[k]!)
                own += try TriggerRecord.decode(&r).map { "\(TriggerKeys.index(ofRow: k)):\($0.id):\($0.location):\($0.after)" }
            }
            #expect(own == want[n], "\(n)")
            #expect(st.pendingBytes == UInt64(legacy.filter { $0.key.starts(with: prefix) }.reduce(0) { $0 + $1.value.count }))
        }
        // The definitions go as they are.
        #expect(legacy[TriggerKeys.definitions("t")] == current[TriggerKeys.definitions("t")])

        // This build installs it (as a stream from 0.6.0) with the same deliveries ahead, and goes on.
        let f = try openStore()
        try await f.installSnapshot(chunks: try chunks(s, legacy: true))
        #expect(try outboxes(f, names) == want)
        #expect(try f.stateHash() == s.stateHash())
        // Delivered: its own rows named (as after an upgrade from 0.6.0), the records after them by `through`.
        try await T().op(f, .advance([TriggerCursor(name: "b", group: group, through: ix[6], rows: ix)]))
        #expect(try f.triggerOutbox(namespace: "t", trigger: "b", after: nil, limit: 10).isEmpty)
        let next = try await f.set("/m/k9", "9").index
        #expect(try f.triggerOutbox(namespace: "t", trigger: "b", after: nil, limit: 10).map(\.index) == [next])
        #expect(try f.triggerOutbox(namespace: "t", trigger: "a", after: nil, limit: 10).map(\.index) == Array(ix[4...]) + [next])
    }

    @Test func withoutTriggersBothLayoutsAreTheSameStream() async throws {
        let s = try openStore()
        for i in 0..<20 { _ = try await s.set("/x/k\(i)", "\(i)") }
        #expect(try chunks(s, legacy: true) == chunks(s, legacy: false))
    }
}
