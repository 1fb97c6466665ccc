import EmberCore
import EmberTestSupport
import Foundation
import Testing
@testable import EmberStorage

/// Storage format 6 (`TriggerCompactRecord.format`: locations relative to the entry's path)
/// over a directory of format 5, whose compact records spell out their locations and wildcard
/// values (`locationsFormat`): after the upgrade both forms sit in one stream, and every
/// trigger reads its events from them in log order with the same ids and contents as a store
/// that kept every record full, before and after its cursor moves through the older rows.
@Suite(.printsSeedOnFailure) struct TriggerRecordUpgradeTests {
    typealias C = TriggerCompactRecordTests

    /// Rewrites `s`'s compact records in format 5's form, as a build of that format wrote them
    /// (the same counts: the header is the full record's either way).
    static func rewriteAsFormat5(_ s: EmberStore) async throws -> Int {
        try await s.perform { w in
            try w.writeTxn { t in
                var rows: [([UInt8], [UInt8])] = []
                try t.scanTriggerRows(w.tables, prefix: TriggerChangeLog.recordRows) { k, v in
                    if v.first == TriggerCompactRecord.format { rows.append((k, v)) }
                    return true
                }
                let sets = try w.tables.allTriggerSets(t)
                for (k, v) in rows {
                    let index = TriggerKeys.index(ofRow: k)
                    let e = try TriggerChangeLog.logEntry(w.tables, t, index)
                    let events = try TriggerCompactRecord.decode(v, base: try #require(TriggerCompactRecord.basePath(e.operation)))
                    let values = try events.map { try TriggerCompactRecord.value(at: $0.location, in: e) }
                    let at = try TriggerChangeLog.position(index, v)
                    let last = TriggerChangeLog.Position(index: index - 1, records: at.records - 1,
                                                         bytes: at.bytes - UInt64(TriggerChangeLog.headerBytes)
                                                             - UInt64(TriggerCompactRecord.fullBodySize(events, values, authType: Applier.triggerAuth(e.auth).0,
                                                                                                          authID: Applier.triggerAuth(e.auth).1)),
                                                         events: at.events - UInt64(events.count))
                    let group = TriggerKeys.index(ofRow: Array(k.dropLast(8)))
                    let pattern = try #require(sets[e.namespace]?.definitions.first { $0.group == group }?.pattern)
                    let old = TriggerCompactRecord.encode(events, after: values, pattern, entry: e, after: last,
                                                          format: TriggerCompactRecord.locationsFormat)
                    #expect(old.at == at && old.bytes.first == TriggerCompactRecord.locationsFormat && old.bytes.count > v.count)
                    try t.put(w.tables.meta, k, old.bytes)
                }
                return rows.count
            }
        }
    }

    /// Every trigger of `C.history` reads the same events from `a` and `b`: indexes in log order,
    /// event ids and contents; and the same states.
    static func expectSameReads(_ a: EmberStore, _ b: EmberStore, _ note: String) throws {
        for name in ["made", "made2", "any", "likes", "feed"] {
            let ea = try a.triggerOutbox(namespace: "t", trigger: name, after: nil, limit: 10_000)
            let eb = try b.triggerOutbox(namespace: "t", trigger: name, after: nil, limit: 10_000)
            #expect(!ea.isEmpty && ea.map(\.index) == eb.map(\.index), "\(note) \(name)")
            #expect(ea.map { $0.events.map(\.id) } == eb.map { $0.events.map(\.id) } && ea.map(\.events) == eb.map(\.events), "\(note) \(name)")
            #expect(ea.map(\.index) == ea.map(\.index).sorted(), "\(note) \(name)")
        }
        #expect(try a.triggers(namespace: "t").map(\.state) == b.triggers(namespace: "t").map(\.state), "\(note)")
    }

    /// An advance entry after `entries[..<half]` moving `made`'s cursor halfway through its
    /// records, the entries after it (shifted by one), and the indexes `made` reads after it.
    static func madeHalfway(_ a: EmberStore, _ entries: [LogEntry], half: Int) throws -> (LogEntry, [LogEntry], [UInt64]) {
        let made = try a.triggerOutbox(namespace: "t", trigger: "made", after: nil, limit: 10_000)
        let group = try #require(try a.triggerSet(namespace: "t").definition(named: "made")).group
        let through = made[made.count / 2].index
        let advance = LogEntry(index: entries[half - 1].index + 1, term: 1, namespace: "t",
                               operation: .triggers(.advance([TriggerCursor(name: "made", group: group, through: through, rows: [])])),
                               timestamp: 1_700_000_100_000, auth: .admin)
        let rest = entries[half...].map { e in
            LogEntry(index: e.index + 1, term: e.term, namespace: e.namespace, operation: e.operation, timestamp: e.timestamp, auth: e.auth)
        }
        let expected = made.map(\.index).filter { $0 > through }
        #expect(!expected.isEmpty)
        return (advance, rest, expected)
    }

    @Test func recordsOfFormat5AreDeliveredInOrderWithTheirIdsAfterTheUpgrade() async throws {
        var g = TestSeed.generator(0x06_f0a5)
        let entries = C.entries(C.history(&g))
        let dir = tempDir()
        var off = smallOptions()
        off.compactTriggerRecords = false
        var a = try openStore(dir)
        let b = try openStore(tempDir(), off)
        defer { b.close() }
        func apply(_ batch: ArraySlice<LogEntry>) async throws {
            let ra = try await a.appendAndApply(entries: Array(batch), through: batch.last!.index)
            let rb = try await b.appendAndApply(entries: Array(batch), through: batch.last!.index)
            #expect(ra.map(\.outcome) == rb.map(\.outcome) && ra.map(\.triggerReach) == rb.map(\.triggerReach))
        }
        let half = entries.count / 2
        var i = 0
        while i < half {
            let n = min(half - i, Int.random(in: 1...40, using: &g))
            try await apply(entries[i..<(i + n)])
            i += n
        }
        // The older build's directory: its records, its mark.
        let rewritten = try await Self.rewriteAsFormat5(a)
        #expect(rewritten > 10)
        a.close()
        try StorageFormatTests.setMark(dir, 5)
        a = try openStore(dir)
        defer { a.close() }
        #expect(try StorageFormatTests.mark(dir) == UInt64(BuildInfo.storageFormat))

        // Every trigger reads the same events from either store; `made` moves its cursor
        // halfway through the older records first.
        try Self.expectSameReads(a, b, "after the upgrade")
        let (advance, rest, expected) = try Self.madeHalfway(a, entries, half: half)
        try await apply([advance][...])
        #expect(try a.triggerOutbox(namespace: "t", trigger: "made", after: nil, limit: 10_000).map(\.index) == expected)
        i = 0
        while i < rest.count {
            let n = min(rest.count - i, Int.random(in: 1...40, using: &g))
            try await apply(rest[i..<(i + n)])
            i += n
        }
        try Self.expectSameReads(a, b, "after later writes")
        // Both forms in the one stream now, each expanding to the full store's record.
        let ra = try C.records(a), rb = try C.records(b)
        #expect(Set(ra.keys) == Set(rb.keys))
        #expect(ra.values.contains { $0.first == TriggerCompactRecord.locationsFormat } && ra.values.contains { $0.first == TriggerCompactRecord.format })
        try a.withRead { t in
            for (k, v) in ra {
                let full = try TriggerChangeLog.full(a.tables, t, index: TriggerKeys.index(ofRow: k), v)
                #expect(full == rb[k], "record \(TriggerKeys.index(ofRow: k))")
            }
        }
    }

    /// The common creation's record: the entry's path and the pattern say all but the type.
    @Test func aCreatedLocationsRecordHoldsNoKeyOfIt() throws {
        let pattern = try TriggerPattern(parsing: "/messages/{pushId}")
        let location = try Path("/messages/-NqABCDEFGHIJKLMNOPQR")
        let node = try Node(json: .object(["text": .string("hello"), "n": .int(1)]), depth: 2)
        let e = LogEntry(index: 12_345, term: 1, namespace: "t", operation: .set(path: location, value: node.toJSON()),
                         timestamp: 1_700_000_000_000, auth: .user(.object(["uid": .string("u-1")])))
        let last = TriggerChangeLog.Position(index: 12_000, records: 9_000, bytes: 3_000_000, events: 9_500)
        let now = TriggerCompactRecord.encodeCreated(.created, at: location, pattern, value: node, entry: e, after: last)
        let event = TriggerCompactRecord.Event(type: .created, location: location, params: try #require(pattern.match(location)))
        let old = TriggerCompactRecord.encode([event], after: [node], pattern, entry: e, after: last, format: TriggerCompactRecord.locationsFormat)
        #expect(now.at == old.at)
        #expect(!now.bytes.contains(subsequence: Array("-NqABCDEFGHIJKLMNOPQR".utf8)) && now.bytes.count <= 24 && old.bytes.count >= 70,
                "\(now.bytes.count) against \(old.bytes.count) bytes")
        #expect(try TriggerCompactRecord.decode(now.bytes, base: location) == [event])
        #expect(try TriggerCompactRecord.decode(old.bytes, base: location) == [event])
    }
}

private extension Array where Element == UInt8 {
    func contains(subsequence s: [UInt8]) -> Bool {
        guard !s.isEmpty, s.count <= count else { return false }
        return (0...(count - s.count)).contains { Array(self[$0..<($0 + s.count)]) == s }
    }
}
