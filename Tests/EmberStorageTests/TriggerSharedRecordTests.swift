import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// The shared change records of triggers (real LMDB stores): one record per write for every
/// trigger of a group, no trigger state written per write, cursors of several triggers in one
/// `advance` entry, pruning once every trigger read a record, the retention limit on shared
/// records, and a 0.6.0 directory's per-trigger outbox rows delivered after the upgrade.
@Suite struct TriggerSharedRecordTests {
    static func trigger(_ path: String, on: String = "written", extra: String = "") -> String {
        #"{"path": "\#(path)", "on": ["\#(on)"], "url": "http://127.0.0.1:9/h", "secret": "0123456789abcdef"\#(extra)}"#
    }

    static func defs(_ items: [(String, String)]) -> String {
        "{" + items.map { "\"\($0.0)\": \($0.1)" }.joined(separator: ",") + "}"
    }

    @discardableResult
    func op(_ s: EmberStore, _ o: TriggerOperation) async throws -> WriteResult {
        let r = try await s.submit(namespace: "t", .triggers(o))
        if case .rejected(let e) = r.outcome { Issue.record("rejected: \(e)") }
        return r
    }

    /// Every row under `triggers/`, by key.
    func rows(_ s: EmberStore) throws -> [[UInt8]: [UInt8]] {
        try s.withRead { t in
            var out: [[UInt8]: [UInt8]] = [:]
            try t.scanTriggerRows(s.tables, prefix: TriggerKeys.prefix) { k, v in out[k] = v; return true }
            return out
        }
    }

    func records(_ s: EmberStore, _ group: UInt64) throws -> [UInt64] {
        try s.withRead { t in
            var out: [UInt64] = []
            try t.scanTriggerRows(s.tables, prefix: TriggerChangeLog.recordsPrefix("t", group)) { k, _ in
                out.append(TriggerKeys.index(ofRow: k)); return true
            }
            return out
        }
    }

    func state(_ s: EmberStore, _ name: String) throws -> TriggerState {
        try #require(try s.triggers(namespace: "t").first { $0.definition.name == name }).state
    }

    @Test func tenTriggersOnOnePatternWriteOneRecordPerWriteAndNoState() async throws {
        let s = try openStore()
        let names = (0..<10).map { "t\($0)" }
        try await op(s, .define(text: Self.defs(names.map { ($0, Self.trigger("/bench/{w}/{k}", on: "created")) })))
        let group = try #require(s.triggerSet(namespace: "t").definitions.first?.group)
        #expect(try s.triggerSet(namespace: "t").definitions.allSatisfy { $0.group == group })
        let before = try rows(s)
        var indexes: [UInt64] = []
        for i in 0..<20 { indexes.append(try await s.set("/bench/w1/k\(i)", #"{"v": \#(i), "text": "a small payload"}"#).index) }
        let after = try rows(s)
        let written = after.filter { before[$0.key] != $0.value }
        // One new row per write (the group's record) and nothing else: no state, no summary.
        #expect(written.count == 20)
        #expect(written.keys.allSatisfy { $0.starts(with: TriggerChangeLog.recordsPrefix("t", group)) })
        let bytes = written.reduce(0) { $0 + $1.key.count + $1.value.count }
        // What 0.6.0 wrote for the same writes: per trigger an outbox row (the same events, no
        // running counts) and its state rewritten (format 1).
        let body = written.values.reduce(0) { $0 + $1.count - TriggerChangeLog.headerBytes }
        let old = names.reduce(0) { sum, n in
            sum + 20 * (TriggerKeys.row(TriggerKeys.outboxPrefix("t", n), 1).count + TriggerKeys.state("t", n).count
                        + TriggerState().encodedV1.count) + body
        }
        print("10 triggers, one group, 20 writes: \(written.count) rows, \(bytes) bytes (keys and values), \(bytes / 20) bytes per write; "
              + "0.6.0's layout: 400 rows, \(old) bytes, \(old / 20) bytes per write")
        for n in names {
            let st = try state(s, n)
            #expect(st.pending == 20 && st.events == 20 && !st.behind)
            #expect(st.pendingBytes == UInt64(written.values.reduce(0) { $0 + $1.count }))
            let out = try s.triggerOutboxRead(namespace: "t", trigger: n, after: nil, limit: 100)
            #expect(out.group == group && out.rows.map(\.index) == indexes && out.rows.allSatisfy { !$0.own })
            #expect(out.rows[3].events.map(\.id) == ["\(indexes[3])-0"] && out.rows[3].events[0].params == ["w": "w1", "k": "k3"])
        }
    }

    @Test func cursorsOfSeveralTriggersMoveInOneEntryAndPruneWhatAllRead() async throws {
        let s = try openStore()
        try await op(s, .define(text: Self.defs([("a", Self.trigger("/m/{id}")), ("b", Self.trigger("/m/{id}")),
                                                 ("c", Self.trigger("/m/{id}")), ("d", Self.trigger("/m/{id}", on: "deleted"))])))
        let set = try s.triggerSet(namespace: "t")
        let group = set.definitions[0].group
        #expect(set.definitions[1].group == group && set.definitions[3].group != group, "the kinds are part of the group")
        var ix: [UInt64] = []
        for i in 0..<6 { ix.append(try await s.set("/m/k\(i)", "\(i)").index) }
        #expect(try records(s, group) == ix)
        #expect(try records(s, set.definitions[3].group).isEmpty, "no record where a group has no event")

        try await op(s, .advance([TriggerCursor(name: "a", group: group, through: ix[3], rows: []),
                                  TriggerCursor(name: "b", group: group, through: ix[5], rows: [])]))
        #expect(try records(s, group) == ix, "c still holds every record")
        #expect(try state(s, "a").cursor == ix[3] && state(s, "a").pending == 2 && state(s, "b").pending == 0)
        #expect(try s.triggerOutbox(namespace: "t", trigger: "a", after: nil, limit: 10).map(\.index) == Array(ix[4...]))
        #expect(try s.triggerOutbox(namespace: "t", trigger: "b", after: nil, limit: 10).isEmpty)

        // A cursor naming another group (read before a redefinition) moves nothing.
        try await op(s, .advance([TriggerCursor(name: "c", group: group &+ 1, through: ix[5], rows: [])]))
        #expect(try state(s, "c").pending == 6 && state(s, "c").cursor < ix[0])

        try await op(s, .advance([TriggerCursor(name: "c", group: group, through: ix[2], rows: [])]))
        #expect(try records(s, group) == Array(ix[3...]), "records every trigger read are pruned")
        try await op(s, .advance([TriggerCursor(name: "a", group: group, through: ix[5], rows: []),
                                  TriggerCursor(name: "c", group: group, through: ix[5], rows: [])]))
        #expect(try records(s, group).isEmpty)
        for n in ["a", "b", "c"] { #expect(try state(s, n).pending == 0 && state(s, n).pendingBytes == 0 && state(s, n).events == 6) }

        // The running counts go on from the pruned records.
        let next = try await s.set("/m/k9", "9").index
        #expect(try records(s, group) == [next])
        for n in ["a", "b", "c"] {
            #expect(try state(s, n).pending == 1 && state(s, n).events == 7)
            #expect(try s.triggerOutbox(namespace: "t", trigger: n, after: nil, limit: 10).map(\.index) == [next])
        }
        // A redefinition that changes a trigger's kinds keeps what it had not delivered.
        try await op(s, .define(text: Self.defs([("a", Self.trigger("/m/{id}", on: "created")), ("b", Self.trigger("/m/{id}")),
                                                 ("c", Self.trigger("/m/{id}"))])))
        let own = try s.triggerOutboxRead(namespace: "t", trigger: "a", after: nil, limit: 10)
        #expect(own.rows.map(\.index) == [next] && own.rows[0].own && own.group != group)
        #expect(try state(s, "a").pending == 1 && state(s, "a").events == 7)
        try await s.set("/m/k10", "10")
        #expect(try s.triggerOutbox(namespace: "t", trigger: "a", after: nil, limit: 10).count == 2)
        try await op(s, .advance([TriggerCursor(name: "a", group: own.group, through: next, rows: [next])]))
        #expect(try state(s, "a").pending == 1)
    }

    @Test func pastItsLimitATriggerKeepsWhatItHoldsWhileTheOthersGoOn() async throws {
        let s = try openStore()
        try await op(s, .define(text: Self.defs([("small", Self.trigger("/m/{id}", extra: #", "retainEntries": 2"#)),
                                                 ("big", Self.trigger("/m/{id}"))])))
        let group = try s.triggerSet(namespace: "t").definitions[0].group
        try await op(s, .pause(name: "small"))
        var ix: [UInt64] = []
        for i in 0..<5 { ix.append(try await s.set("/m/k\(i)", "\(i)").index) }
        var small = try state(s, "small")
        #expect(small.behind && small.pending == 2 && small.skipped == 3 && small.gapFirst == ix[2] && small.gapLast == ix[4])
        #expect(small.events == 5)
        #expect(try s.triggerOutbox(namespace: "t", trigger: "small", after: nil, limit: 10).map(\.index) == Array(ix[..<2]))
        #expect(try state(s, "big").pending == 5 && !state(s, "big").behind)
        // The other trigger's progress prunes what the one past its limit does not keep.
        try await op(s, .advance([TriggerCursor(name: "big", group: group, through: ix[4], rows: [])]))
        #expect(try records(s, group) == Array(ix[..<2]))
        // Once it delivered what it kept, it reads the records from then on (the gap stays recorded).
        try await op(s, .resume(name: "small"))
        let moved = try await op(s, .advance([TriggerCursor(name: "small", group: group, through: ix[1], rows: [])]))
        small = try state(s, "small")
        #expect(small.cursor == moved.index && small.pending == 0 && small.behind && small.skipped == 3)
        #expect(try records(s, group).isEmpty)
        let later = try await s.set("/m/k9", "9").index
        #expect(try s.triggerOutbox(namespace: "t", trigger: "small", after: nil, limit: 10).map(\.index) == [later])
        #expect(try state(s, "small").pending == 1 && state(s, "small").events == 6)
        // Every trigger of a group past its limit: the entry gets no record.
        try await op(s, .define(text: Self.defs([("only", Self.trigger("/n/{id}", extra: #", "retainEntries": 1"#))])))
        let g2 = try s.triggerSet(namespace: "t").definitions[0].group
        try await s.set("/n/a", "1")
        try await s.set("/n/b", "2")
        #expect(try records(s, g2).count == 1 && state(s, "only").skipped == 1 && state(s, "only").events == 2)
    }

    @Test func aDeadLetterOfASharedRecordIsTheTriggersEvents() async throws {
        let s = try openStore()
        try await op(s, .define(text: Self.defs([("a", Self.trigger("/m/{id}")), ("b", Self.trigger("/m/{id}"))])))
        let i = try await s.update("/", [("m/x", "1"), ("m/y", "2")]).index
        try await op(s, .settle(name: "a", indexes: [i], deadLetter: "HTTP 500"))
        let dead = try s.triggerDeadLetters(namespace: "t", trigger: "a", limit: 10)
        #expect(dead.count == 1 && dead[0].index == i && dead[0].events.map(\.location) == [p("/m/x"), p("/m/y")])
        #expect(try state(s, "a").pending == 0 && state(s, "b").pending == 1)
        try await op(s, .replay(name: "a", from: 0))
        let out = try s.triggerOutboxRead(namespace: "t", trigger: "a", after: nil, limit: 10)
        #expect(out.rows.map(\.index) == [i] && out.rows[0].own && out.rows[0].events.count == 2)
        #expect(try state(s, "a").pending == 1)
    }

    /// A 0.6.0 directory: format-1 states and an outbox row per trigger and entry, no shared
    /// record. Reopened, every pending row is delivered (read, then settled by either entry
    /// kind), and later writes go to the shared records.
    @Test func aDirectoryOf060KeepsItsPendingRows() async throws {
        let dir = tempDir()
        var s = try openStore(dir)
        try await op(s, .define(text: Self.defs([("a", Self.trigger("/m/{id}")), ("b", Self.trigger("/m/{id}"))])))
        let group = try s.triggerSet(namespace: "t").definitions[0].group
        var ix: [UInt64] = []
        for i in 0..<3 { ix.append(try await s.set("/m/k\(i)", "\(i)").index) }
        let expected = try s.triggerOutbox(namespace: "t", trigger: "a", after: nil, limit: 10)
        // Rewrite the triggers' rows as 0.6.0 wrote them.
        let tables = s.tables
        try await s.perform { w in
            try w.writeTxn { t in
                for name in ["a", "b"] {
                    var st = try #require(try tables.triggerState(t, "t", name))
                    st = TriggerState(cursor: st.cursor)
                    for (i, events) in expected {
                        var enc = ByteWriter()
                        TriggerRecord.encode(events, into: &enc)
                        try t.put(tables.meta, TriggerKeys.row(TriggerKeys.outboxPrefix("t", name), i), enc.bytes)
                        st.pending += 1
                        st.pendingBytes += UInt64(enc.bytes.count)
                        st.events += UInt64(events.count)
                    }
                    try t.put(tables.meta, TriggerKeys.state("t", name), st.encodedV1)
                }
                try t.deletePrefix(tables.meta, TriggerKeys.prefix + Array("r/".utf8))
                try t.deletePrefix(tables.meta, TriggerKeys.prefix + Array("g/".utf8))
                // 0.6.0 had no shared records in either layout.
                try t.drop(tables.trigrec, delete: false)
                try t.deletePrefix(tables.meta, TriggerRecordRows.headPrefix)
            }
        }
        s.close()
        s = try openStore(dir)
        defer { s.close() }
        #expect(try state(s, "a").pending == 3 && state(s, "a").events == 3)
        let later = try await s.set("/m/k9", "9").index
        let read = try s.triggerOutboxRead(namespace: "t", trigger: "a", after: nil, limit: 10)
        #expect(read.group == group && read.rows.map(\.index) == ix + [later])
        #expect(read.rows.map(\.own) == [true, true, true, false])
        #expect(read.rows[0].events == expected[0].events)
        #expect(try state(s, "a").pending == 4 && state(s, "a").events == 4)
        // A settle entry of 0.6.0 (in a log written before the upgrade) and an advance both settle them.
        try await op(s, .settle(name: "b", indexes: [ix[0]], deadLetter: nil))
        try await op(s, .advance([TriggerCursor(name: "a", group: group, through: ix[2], rows: ix)]))
        #expect(try s.triggerOutbox(namespace: "t", trigger: "a", after: nil, limit: 10).map(\.index) == [later])
        #expect(try s.triggerOutbox(namespace: "t", trigger: "b", after: nil, limit: 10).map(\.index) == [ix[1], ix[2], later])
        #expect(try state(s, "a").pending == 1 && state(s, "b").pending == 3)
    }

    @Test func anAdvanceEntryRoundTripsAndIsChecked() throws {
        let o = TriggerOperation.advance([TriggerCursor(name: "a", group: 7, through: 9, rows: [1, 2]),
                                          TriggerCursor(name: "b", group: .max, through: 3, rows: [])])
        let e = LogEntry(index: 3, term: 1, namespace: "t", operation: .triggers(o), timestamp: 7)
        #expect(try LogEntry(decoding: e.encoded()) == e)
        let many = (0...TriggerOperation.maxCursors).map { TriggerCursor(name: "t\($0)", group: 1, through: 1, rows: []) }
        #expect(throws: StorageError.self) { try EmberStore.checkTriggers(.advance(many)) }
        #expect(throws: StorageError.self) { try EmberStore.checkTriggers(.advance([TriggerCursor(name: "", group: 1, through: 1, rows: [])])) }
    }
}

extension TriggerState {
    init(cursor: UInt64) {
        self.init()
        self.cursor = cursor
    }
}
