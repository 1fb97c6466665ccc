import EmberCore
import EmberTestSupport
import Foundation
import Testing
@testable import EmberStorage

/// Compact trigger change records (`TriggerCompactRecord`): a cluster member keeping its log
/// stores a group's record of created locations as their types, locations and wildcard values,
/// and rebuilds the rest from the log entry. Against a store that writes every record full,
/// applying the same entries: the same keys, each compact record expanding to the full one byte
/// for byte (so its header's counts are the full record's), the same outbox reads, the same
/// snapshot stream; log compaction leaves no compact record whose entry it deleted.
@Suite(.printsSeedOnFailure) struct TriggerCompactRecordTests {
    static let defs = #"""
    {"made": {"path": "/messages/{id}", "on": ["created"], "url": "http://127.0.0.1:9/m", "secret": "0123456789abcdef"},
     "made2": {"path": "/messages/{id}", "on": ["created"], "url": "http://127.0.0.1:9/m2", "secret": "0123456789abcdef"},
     "any": {"path": "/messages/{id}", "on": ["written"], "url": "http://127.0.0.1:9/a", "secret": "0123456789abcdef"},
     "likes": {"path": "/rooms/{room}/likes/{uid}", "on": ["created", "deleted"], "url": "http://127.0.0.1:9/l", "secret": "0123456789abcdef"},
     "feed": {"path": "/rooms/{room}/likes/{uid}", "on": ["written"], "feed": true}}
    """#

    /// A seeded value: leaves of every kind, objects, array-like objects (holes too), priorities
    /// and server values.
    static func value(_ g: inout SplitMix64, depth: Int = 0) -> JSON {
        switch Int.random(in: 0..<(depth > 2 ? 6 : 10), using: &g) {
        case 0: return .bool(Bool.random(using: &g))
        case 1: return .int(Int64.random(in: -1_000_000...1_000_000_000_000, using: &g))
        case 2: return .double(Double(Int.random(in: -1000...1000, using: &g)) / 8)
        case 3: return .string(["", "a", "héllo", String(repeating: "x", count: Int.random(in: 100...300, using: &g))][Int.random(in: 0..<4, using: &g)])
        case 4: return .object([".sv": .string("timestamp")])
        case 5: return .object([".sv": .object(["increment": .int(Int64.random(in: 1...9, using: &g))])])
        case 6: return .array((0..<Int.random(in: 1...4, using: &g)).map { _ in value(&g, depth: depth + 1) })
        case 7:
            // Index-like keys with holes: an array in JSON when dense enough.
            var o: KeyMap<JSON> = [:]
            for k in 0..<Int.random(in: 1...4, using: &g) { o[String(k * Int.random(in: 1...3, using: &g))] = value(&g, depth: depth + 1) }
            return .object(o)
        case 8: return .object([".value": value(&g, depth: depth + 1), ".priority": .int(Int64.random(in: 0...9, using: &g))])
        default:
            var o: KeyMap<JSON> = [:]
            for k in 0..<Int.random(in: 1...5, using: &g) { o["k\(k)"] = value(&g, depth: depth + 1) }
            return .object(o)
        }
    }

    static func history(_ g: inout SplitMix64) -> [(WriteOperation, WriteAuth)] {
        var ops: [(WriteOperation, WriteAuth)] = [
            (.setRules(text: #"{"rules": {".read": true, ".write": true}}"#), .admin),
            (.triggers(.define(text: defs)), .admin),
        ]
        let auths: [WriteAuth] = [.admin, .user(nil), .user(.object(["uid": .string("u-1")])), .user(.object(["sub": .string("s-2")]))]
        for k in 0..<300 {
            let auth = auths[Int.random(in: 0..<auths.count, using: &g)]
            let op: WriteOperation
            switch Int.random(in: 0..<13, using: &g) {
            case 0...3: op = .set(path: p("/messages/m\(Int.random(in: 0..<60, using: &g))"), value: value(&g))
            case 4: op = .set(path: p("/messages/m\(Int.random(in: 0..<60, using: &g))"), value: .null)
            case 5:
                // Above the locations: created, updated and deleted ones in one write.
                var o: KeyMap<JSON> = [:]
                for _ in 0..<Int.random(in: 1...4, using: &g) { o["m\(Int.random(in: 0..<60, using: &g))"] = value(&g) }
                op = .set(path: p("/messages"), value: .object(o))
            case 6:
                // Parts at locations and below them (a delta that is not the whole value: full).
                op = .update(path: p("/"), values: [(p("messages/m\(Int.random(in: 0..<60, using: &g))"), value(&g)),
                                                    (p("messages/n\(k)/x"), value(&g)),
                                                    (p("rooms/r\(k % 3)/likes/u\(k)"), .bool(true))])
            case 7: op = .set(path: p("/rooms/r\(Int.random(in: 0..<3, using: &g))/likes/u\(Int.random(in: 0..<8, using: &g))"), value: value(&g))
            case 8: op = .set(path: p("/rooms/r\(Int.random(in: 0..<3, using: &g))"), value: .object(["likes": .object(["a": .int(1), "b": value(&g)])]))
            case 9: op = .set(path: p("/elsewhere/x\(k % 4)"), value: .int(Int64(k)))
            case 10: op = .set(path: p("/messages/m\(Int.random(in: 0..<60, using: &g))/n"), value: .object([".sv": .object(["increment": .int(1)])]))
            case 11: op = .update(path: p("/messages"), values: [(p("m\(Int.random(in: 0..<60, using: &g))"), value(&g))])
            default:
                // The same as its parts' text (`updateText`): at locations and below them.
                var members: [String] = []
                for (i, part) in ["messages/m\(Int.random(in: 0..<60, using: &g))", "messages/t\(k)/x", "rooms/r\(k % 3)/likes/v\(k)"].enumerated() {
                    var v = value(&g)
                    while ServerValues.containsPlaceholder(v) { v = value(&g) }
                    members.append("\"\(part)\":" + (i == 2 ? "true" : String(decoding: v.serializedBytes(), as: UTF8.self)))
                }
                op = .updateText(path: .root, parts: UpdateText.scan(body: Array(("{" + members.joined(separator: ",") + "}").utf8), base: .root,
                                                                     maxParts: 10, maxNodes: 100_000)!.text)
            }
            ops.append((op, auth))
        }
        return ops
    }

    static func entries(_ ops: [(WriteOperation, WriteAuth)]) -> [LogEntry] {
        ops.enumerated().map { i, o in
            LogEntry(index: UInt64(i + 1), term: 1, namespace: "t", operation: o.0, timestamp: 1_700_000_000_000 + Int64(i), auth: o.1)
        }
    }

    static func records(_ s: EmberStore) throws -> [[UInt8]: [UInt8]] {
        try s.withRead { t in
            var out: [[UInt8]: [UInt8]] = [:]
            try t.scanTriggerRows(s.tables, prefix: TriggerKeys.prefix + Array("r/".utf8)) { k, v in out[k] = v; return true }
            return out
        }
    }

    static func allRows(_ s: EmberStore) throws -> [[UInt8]: [UInt8]] {
        try s.withRead { t in
            var out: [[UInt8]: [UInt8]] = [:]
            try t.scanTriggerRows(s.tables, prefix: TriggerKeys.prefix) { k, v in out[k] = v; return true }
            return out
        }
    }

    func pair(_ o: StoreOptions = smallOptions()) throws -> (compact: EmberStore, full: EmberStore) {
        var off = o
        off.compactTriggerRecords = false
        return (try openStore(tempDir(), o), try openStore(tempDir(), off))
    }

    @Test func jsonSizeIsWhatTheEncodingWrites() throws {
        var g = TestSeed.generator(0x15_0c0d)
        for _ in 0..<3_000 {
            let resolved = try ServerValues.resolve(Self.value(&g), existing: .empty, now: 1_700_000_000_000)
            let node = try Node(json: resolved)
            var w = ByteWriter()
            w.json(node.toJSON())
            #expect(TriggerCompactRecord.jsonSize(node) == w.bytes.count)
        }
    }

    @Test func compactRecordsExpandToTheFullRecordsByteForByte() async throws {
        var g = TestSeed.generator(0xc0_4ac7)
        let entries = Self.entries(Self.history(&g))
        let (a, b) = try pair()
        defer { a.close(); b.close() }
        // In batches, as a follower applies them.
        var i = 0
        while i < entries.count {
            let n = min(entries.count - i, Int.random(in: 1...40, using: &g))
            let batch = Array(entries[i..<(i + n)])
            let ra = try await a.appendAndApply(entries: batch, through: batch.last!.index)
            let rb = try await b.appendAndApply(entries: batch, through: batch.last!.index)
            #expect(ra.map(\.outcome) == rb.map(\.outcome) && ra.map(\.triggerReach) == rb.map(\.triggerReach))
            i += n
        }
        let ca = try Self.records(a), cb = try Self.records(b)
        #expect(Set(ca.keys) == Set(cb.keys))
        let compact = ca.filter { TriggerCompactRecord.isCompact($0.value) }
        #expect(compact.count > 20 && compact.count < ca.count)
        #expect(!cb.values.contains { TriggerCompactRecord.isCompact($0) })
        try a.withRead { t in
            for (k, v) in ca {
                let full = try TriggerChangeLog.full(a.tables, t, index: TriggerKeys.index(ofRow: k), v)
                #expect(full == cb[k], "record \(TriggerKeys.index(ofRow: k))")
            }
        }
        // Every trigger's outbox and the feed read the same events.
        for name in ["made", "made2", "any", "likes", "feed"] {
            let ea = try a.triggerOutbox(namespace: "t", trigger: name, after: nil, limit: 10_000)
            let eb = try b.triggerOutbox(namespace: "t", trigger: name, after: nil, limit: 10_000)
            #expect(ea.count == eb.count && ea.map(\.index) == eb.map(\.index) && ea.map(\.events) == eb.map(\.events), "\(name)")
            #expect(!ea.isEmpty)
        }
        #expect(try a.triggers(namespace: "t").map(\.state) == b.triggers(namespace: "t").map(\.state))
        // A snapshot carries full records: the full store's rows exactly.
        var chunks: [[UInt8]] = []
        try a.snapshot(maxChunkBytes: 4_096) { chunks.append($0) }
        var streamed: [[UInt8]: [UInt8]] = [:]
        for (tag, k, v) in try snapshotRecords(chunks) where tag == 5 && k.starts(with: TriggerKeys.prefix) { streamed[k] = v }
        #expect(streamed == (try Self.allRows(b)))
    }

    @Test func logCompactionExpandsTheRecordsOfTheEntriesItDeletes() async throws {
        var g = TestSeed.generator(0x10_9c0e)
        let entries = Self.entries(Self.history(&g))
        var o = smallOptions()
        o.logRetention = 16
        o.compactionMinimum = 8
        let (a, b) = try pair(o)
        defer { a.close(); b.close() }
        var sawCompact = false
        for e in entries {
            _ = try await a.appendAndApply(entries: [e], through: e.index)
            _ = try await b.appendAndApply(entries: [e], through: e.index)
            let first = try a.withRead { t in try a.tables.metaU64(t, "firstIndex") }
            // No compact record names an entry the log no longer holds.
            for (k, v) in try Self.records(a) where TriggerCompactRecord.isCompact(v) {
                #expect(TriggerKeys.index(ofRow: k) >= first)
                sawCompact = true
            }
        }
        let first = try a.withRead { t in try a.tables.metaU64(t, "firstIndex") }
        #expect(first > UInt64(entries.count / 2) && sawCompact)
        // Expanded in place: the full store's rows, but for the compact ones still in the log.
        let ca = try Self.records(a), cb = try Self.records(b)
        #expect(Set(ca.keys) == Set(cb.keys))
        try a.withRead { t in
            for (k, v) in ca {
                let i = TriggerKeys.index(ofRow: k)
                if i < first { #expect(v == cb[k], "record \(i)") }
                let full = try TriggerChangeLog.full(a.tables, t, index: i, v)
                #expect(full == cb[k], "record \(i)")
            }
        }
        for name in ["made", "any", "likes"] {
            let ea = try a.triggerOutbox(namespace: "t", trigger: name, after: nil, limit: 10_000)
            let eb = try b.triggerOutbox(namespace: "t", trigger: name, after: nil, limit: 10_000)
            #expect(ea.map(\.events) == eb.map(\.events), "\(name)")
        }
    }

    /// A single node (no log rows) and a learner's unlogged applies store full records only.
    @Test func withoutLogRowsEveryRecordIsFull() async throws {
        var o = smallOptions()
        o.logRetention = StoreOptions.singleNodeLogRetention
        let s = try openStore(tempDir(), o)
        defer { s.close() }
        _ = try await s.submit(namespace: "t", .triggers(.define(text: Self.defs)))
        for k in 0..<20 { _ = try await s.set("/messages/m\(k)", #"{"n":\#(k)}"#) }
        let rows = try Self.records(s)
        #expect(rows.count >= 20 && !rows.values.contains { TriggerCompactRecord.isCompact($0) })
    }
}
