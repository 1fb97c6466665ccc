import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// Triggers applied from the log (real LMDB stores): definitions, the outbox each committed
/// write fills with its events (before, after, delta, params, auth), settling, dead letters,
/// replay, the retention gap, and a snapshot carrying it all to another store.
@Suite struct TriggerApplyTests {
    static let defs = #"""
    {"msgs": {"path": "/messages/{id}", "on": ["created", "updated", "deleted"], "url": "http://127.0.0.1:9/h",
              "secret": "0123456789abcdef", "retainEntries": 4},
     "likes": {"path": "/rooms/{room}/likes/{uid}", "on": ["written"], "url": "http://127.0.0.1:9/l", "secret": "0123456789abcdef"}}
    """#

    func outbox(_ s: EmberStore, _ name: String) throws -> [TriggerEvent] {
        try s.triggerOutbox(namespace: "t", trigger: name, after: nil, limit: 100).flatMap(\.events)
    }

    @discardableResult
    func op(_ s: EmberStore, _ o: TriggerOperation) async throws -> WriteResult {
        try await s.submit(namespace: "t", .triggers(o))
    }

    @Test func committedWritesFillTheOutbox() async throws {
        let s = try openStore()
        try await s.set("/messages/old", #"{"text": "before triggers"}"#)
        let d = try await op(s, .define(text: Self.defs))
        #expect(try s.triggers(namespace: "t").map(\.state.cursor) == [d.index, d.index])
        #expect(try outbox(s, "msgs").isEmpty, "no event for what was written before the definition")

        let a = try await s.submit(namespace: "t", .set(path: p("/messages/m1"), value: j(#"{"text": "hi"}"#)),
                                   auth: .user(.object(["uid": .string("alice")])))
        try await s.update("/", [("messages/m1/text", #""bye""#), ("messages/m2", #"{"text": "2"}"#), ("rooms/r/likes/u", "true")])
        try await s.set("/messages/m2", "null")
        let inc = try await s.submit(namespace: "t", .set(path: p("/messages/n"), value: .object([".sv": .object(["increment": .int(2)])])))
        var ev = try outbox(s, "msgs")
        #expect(ev.map(\.type) == [.created, .updated, .created, .deleted, .created])
        #expect(ev[0].index == a.index && ev[0].authType == "app_user" && ev[0].authID == "alice" && ev[0].params == ["id": "m1"])
        #expect(ev[0].before == .null && ev[0].after == j(#"{"text": "hi"}"#))
        #expect(ev[1].before == j(#"{"text": "hi"}"#) && ev[1].after == j(#"{"text": "bye"}"#) && ev[1].delta == j(#"{"text": "bye"}"#))
        #expect(ev[1].index == ev[2].index && ev[1].seq == 0 && ev[2].seq == 1, "two events of one multi-path update")
        #expect(ev[3].before == j(#"{"text": "2"}"#) && ev[3].after == .null && ev[1].authType == "admin" && ev[1].authID == nil)
        #expect(ev[4].after == .int(2) && ev[4].index == inc.index, "a server increment's resolved value")
        let likes = try outbox(s, "likes")
        #expect(likes.count == 1 && likes[0].type == .written && likes[0].params == ["room": "r", "uid": "u"])

        // Settled entries leave the outbox; a dead-lettered one moves to the dead letters and a
        // replay puts it back; the cursor is the highest settled index.
        let rows = try s.triggerOutbox(namespace: "t", trigger: "msgs", after: nil, limit: 100)
        try await op(s, .settle(name: "msgs", indexes: [rows[0].index], deadLetter: nil))
        try await op(s, .settle(name: "msgs", indexes: [rows[1].index], deadLetter: "HTTP 500"))
        ev = try outbox(s, "msgs")
        #expect(ev.count == 2)
        let dead = try s.triggerDeadLetters(namespace: "t", trigger: "msgs", limit: 10)
        #expect(dead.count == 1 && dead[0].reason == "HTTP 500" && dead[0].events.count == 2)
        var state = try s.triggers(namespace: "t").first { $0.definition.name == "msgs" }!.state
        #expect(state.cursor == rows[1].index && state.deadLetters == 1 && state.pending == 2)
        try await op(s, .replay(name: "msgs", from: 0))
        #expect(try s.triggerDeadLetters(namespace: "t", trigger: "msgs", limit: 10).isEmpty)
        #expect(try s.triggerOutbox(namespace: "t", trigger: "msgs", after: nil, limit: 10).map(\.index) == [rows[1].index, rows[2].index, rows[3].index])

        // Pause, halt and resume are replicated flags.
        try await op(s, .pause(name: "msgs"))
        try await op(s, .halt(name: "msgs", reason: "stop"))
        state = try s.triggers(namespace: "t").first { $0.definition.name == "msgs" }!.state
        #expect(state.paused && state.halted == "stop")
        try await op(s, .resume(name: "msgs"))
        state = try s.triggers(namespace: "t").first { $0.definition.name == "msgs" }!.state
        #expect(!state.paused && state.halted == nil)

        // Redefining keeps a trigger's state by name; removing drops it.
        try await op(s, .define(text: #"{"likes": {"path": "/rooms/{room}/likes/{uid}", "on": ["written"], "url": "http://127.0.0.1:9/l", "secret": "0123456789abcdef"}}"#))
        #expect(try s.triggers(namespace: "t").map(\.definition.name) == ["likes"])
        #expect(try s.triggers(namespace: "t")[0].state.pending == 1)
        #expect(try outbox(s, "msgs").isEmpty)
    }

    @Test func refusedAndConditionFailedWritesMakeNoEvent() async throws {
        let s = try openStore()
        _ = try await s.submit(namespace: "t", .setRules(text: #"{"rules": {".read": true, "messages": {"$id": {".write": "auth != null"}}}}"#))
        try await op(s, .define(text: Self.defs))
        let denied = try await s.submit(namespace: "t", .set(path: p("/messages/x"), value: .int(1)), auth: .user(nil))
        #expect(denied.outcome == .denied)
        let failed = try await s.set("/messages/x", "1", .ifHash("nope"))
        if case .conditionFailed = failed.outcome {} else { Issue.record("condition held: \(failed.outcome)") }
        // A transaction (a conditional set that holds) fires.
        try await s.set("/messages/y", "1", .ifHash(""))
        #expect(try outbox(s, "msgs").map(\.location) == [p("/messages/y")])
        // Trigger entries are an admin's only.
        let r = try await s.submit(namespace: "t", .triggers(.pause(name: "msgs")), auth: .user(nil))
        if case .rejected = r.outcome {} else { Issue.record("a user paused a trigger: \(r.outcome)") }
        #expect(throws: StorageError.self) { try EmberStore.checkTriggers(.define(text: #"{"a": {"path": "x"}}"#)) }
    }

    @Test func pastTheRetentionLimitTheGapIsRecorded() async throws {
        let s = try openStore()
        try await op(s, .define(text: Self.defs))
        var indexes: [UInt64] = []
        for i in 0..<6 { indexes.append(try await s.set("/messages/m\(i)", "\(i)").index) }
        let st = try s.triggers(namespace: "t").first { $0.definition.name == "msgs" }!.state
        #expect(st.pending == 4 && st.skipped == 2 && st.gapFirst == indexes[4] && st.gapLast == indexes[5] && st.behind)
        #expect(st.json["gap"]?["skippedEvents"] == .int(2))
    }

    @Test func aFeedKeepsTheNewestEntries() async throws {
        let s = try openStore()
        try await op(s, .define(text: #"{"f": {"path": "/m/{id}", "on": ["written"], "feed": true, "retainEntries": 3}}"#))
        var indexes: [UInt64] = []
        for i in 0..<5 { indexes.append(try await s.set("/m/k\(i)", "\(i)").index) }
        let rows = try s.triggerOutbox(namespace: "t", trigger: "f", after: nil, limit: 10)
        #expect(rows.map(\.index) == Array(indexes[2...]))
        let st = try s.triggers(namespace: "t")[0].state
        #expect(st.cursor == indexes[1] && st.pending == 3 && !st.behind)
    }

    @Test func aSnapshotCarriesDefinitionsCursorsAndOutbox() async throws {
        let s = try openStore()
        try await op(s, .define(text: Self.defs))
        try await s.set("/messages/a", "1")
        try await s.set("/messages/b", "2")
        let first = try s.triggerOutbox(namespace: "t", trigger: "msgs", after: nil, limit: 1)[0].index
        try await op(s, .settle(name: "msgs", indexes: [first], deadLetter: "gone"))
        var chunks: [[UInt8]] = []
        try s.snapshot { chunks.append($0) }
        let f = try openStore()
        try await f.installSnapshot(chunks: chunks)
        #expect(try f.triggers(namespace: "t").map(\.state) == s.triggers(namespace: "t").map(\.state))
        #expect(try f.triggerOutbox(namespace: "t", trigger: "msgs", after: nil, limit: 10).map(\.index)
                == s.triggerOutbox(namespace: "t", trigger: "msgs", after: nil, limit: 10).map(\.index))
        #expect(try f.triggerDeadLetters(namespace: "t", trigger: "msgs", limit: 10).count == 1)
        // The installed store applies later writes with the definitions it received.
        try await f.set("/messages/c", "3")
        #expect(try f.triggerOutbox(namespace: "t", trigger: "msgs", after: nil, limit: 10).count == 2)
    }

    @Test func entriesRoundTrip() throws {
        for o in [TriggerOperation.define(text: "{}"), .settle(name: "a", indexes: [1, 2, .max], deadLetter: nil),
                  .settle(name: "a", indexes: [], deadLetter: "why"), .halt(name: "b", reason: "r"), .pause(name: "c"),
                  .resume(name: "d"), .replay(name: "e", from: 42)] {
            let e = LogEntry(index: 3, term: 1, namespace: "t", operation: .triggers(o), timestamp: 7)
            #expect(try LogEntry(decoding: e.encoded()) == e)
        }
    }
}
