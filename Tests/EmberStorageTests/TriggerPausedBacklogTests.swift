import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// A trigger that reads nothing (paused, or its receiver down) on a cluster member keeping its
/// log: once its backlog outlives the log's retention, compaction made each of its compact
/// change records full when the record's entry left the log (every record written twice, its
/// entry decoded again, on every member); now the group's records are written full from then
/// on, and compact again once it caught up. Past its retention limit, a write of a group whose
/// triggers all skip rewrites their counts only: the rows `refresh` would leave as they are
/// are not rewritten (the same rows).
@Suite struct TriggerPausedBacklogTests {
    static let defs = #"""
    {"made": {"path": "/messages/{id}", "on": ["created"], "url": "http://127.0.0.1:9/m", "secret": "0123456789abcdef"}}
    """#

    static func entry(_ index: UInt64, _ op: WriteOperation) -> LogEntry {
        LogEntry(index: index, term: 1, namespace: "t", operation: op, timestamp: 1_700_000_000_000 + Int64(index), auth: .admin)
    }

    static func records(_ s: EmberStore) throws -> [UInt64: [UInt8]] {
        try s.withRead { t in
            var out: [UInt64: [UInt8]] = [:]
            try t.scanTriggerRows(s.tables, prefix: TriggerChangeLog.recordRows) { k, v in out[TriggerKeys.index(ofRow: k)] = v; return true }
            return out
        }
    }

    @Test func aPausedTriggersRecordsGoFullOnceTheyOutliveTheLog() async throws {
        var o = smallOptions()
        o.logRetention = 16
        o.compactionMinimum = 8
        var off = o
        off.compactTriggerRecords = false
        let a = try openStore(tempDir(), o), b = try openStore(tempDir(), off)
        defer { a.close(); b.close() }
        var index: UInt64 = 0
        func apply(_ op: WriteOperation) async throws {
            index += 1
            let e = Self.entry(index, op)
            let ra = try await a.appendAndApply(entries: [e], through: index)
            let rb = try await b.appendAndApply(entries: [e], through: index)
            #expect(ra.map(\.outcome) == rb.map(\.outcome))
            if case .rejected(let err) = ra[0].outcome { Issue.record("entry \(index) rejected: \(err)") }
        }
        try await apply(.setRules(text: #"{"rules": {".read": true, ".write": true}}"#))
        try await apply(.triggers(.define(text: Self.defs)))
        try await apply(.triggers(.pause(name: "made")))
        let group = try #require(a.triggerSet(namespace: "t").definitions.first?.group)
        for k in 0..<300 { try await apply(.set(path: p("/messages/m\(k)"), value: j(#"{"n": \#(k), "text": "a small payload"}"#))) }
        let first = a.firstLogIndex
        #expect(first > 250)
        // Only the records made before a compaction first met the group's were expanded (each
        // of the 300 was, before).
        let expanded = a.metrics.triggerRecordsExpanded
        #expect(expanded > 0 && expanded <= o.logRetention + o.compactionMinimum, "\(expanded) records expanded")
        // The same records as the store that writes every record full: byte for byte below the
        // log, rebuilt from the entry above it.
        let ra = try Self.records(a), rb = try Self.records(b)
        #expect(ra.count == 300 && Set(ra.keys) == Set(rb.keys))
        try a.withRead { t in
            for (i, v) in ra {
                if i < first { #expect(v == rb[i], "record \(i)") }
                let full = try TriggerChangeLog.full(a.tables, t, index: i, v)
                #expect(full == rb[i], "record \(i)")
            }
        }
        #expect(try a.triggerOutbox(namespace: "t", trigger: "made", after: nil, limit: 1_000).map(\.events)
                == b.triggerOutbox(namespace: "t", trigger: "made", after: nil, limit: 1_000).map(\.events))
        // Resumed, it delivers everything: once a compaction (one per 8 entries here) finds
        // none of its records, they go compact again. (Fewer writes than the log keeps: none
        // of these leaves it.)
        try await apply(.triggers(.resume(name: "made")))
        try await apply(.triggers(.advance([TriggerCursor(name: "made", group: group, through: index, rows: [])])))
        #expect(try Self.records(a).isEmpty)
        for k in 300..<314 { try await apply(.set(path: p("/messages/m\(k)"), value: j(#"{"n": \#(k)}"#))) }
        let later = try Self.records(a)
        #expect(later.count == 14 && later.values.filter { TriggerCompactRecord.isCompact($0) }.count >= 6)
        #expect(a.metrics.triggerRecordsExpanded == expanded)
    }

    @Test func pastItsLimitAPausedGroupsWritesLeaveWhatRefreshWouldLeave() async throws {
        let s = try openStore()
        defer { s.close() }
        _ = try await s.submit(namespace: "t", .setRules(text: #"{"rules": {".read": true, ".write": true}}"#))
        let limited = #"{"a": {"path": "/m/{id}", "on": ["created"], "url": "http://127.0.0.1:9/a", "secret": "0123456789abcdef", "retainEntries": 3},"#
            + #" "b": {"path": "/m/{id}", "on": ["created"], "url": "http://127.0.0.1:9/b", "secret": "0123456789abcdef", "retainEntries": 5}}"#
        _ = try await s.submit(namespace: "t", .triggers(.define(text: limited)))
        _ = try await s.submit(namespace: "t", .triggers(.pause(name: "a")))
        _ = try await s.submit(namespace: "t", .triggers(.pause(name: "b")))
        let set = try s.triggerSet(namespace: "t")
        let group = try #require(set.definitions.first?.group)
        var ix: [UInt64] = []
        for k in 0..<12 {
            ix.append(try await s.set("/m/k\(k)", "\(k)").index)
            // What `refresh` makes of the rows now changes nothing: the summary and the stream
            // are what every write left, whether it refreshed or not.
            let before = try Self.triggerRows(s)
            try await s.perform { w in
                try w.writeTxn { t in try TriggerChangeLog.refresh(w.tables, t, "t", group, definitions: set.definitions) }
            }
            #expect(try Self.triggerRows(s) == before, "after write \(k)")
        }
        let states = try s.triggers(namespace: "t").map(\.state)
        #expect(states.map(\.behind) == [true, true])
        // Each counted all 12 events, the ones past its limit skipped (`a` keeps 3, `b` 5).
        #expect(states.map(\.events) == [12, 12] && states.map(\.skipped) == [9, 7])
        #expect(states.map(\.gapLast) == [ix[11], ix[11]])
        #expect(try s.triggerOutbox(namespace: "t", trigger: "b", after: nil, limit: 100).map(\.index) == Array(ix[..<5]))
    }

    static func triggerRows(_ s: EmberStore) throws -> [[UInt8]: [UInt8]] {
        try s.withRead { t in
            var out: [[UInt8]: [UInt8]] = [:]
            try t.scanTriggerRows(s.tables, prefix: TriggerKeys.prefix) { k, v in out[k] = v; return true }
            return out
        }
    }
}
