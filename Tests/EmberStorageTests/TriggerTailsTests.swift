import EmberCore
import EmberTestSupport
import Foundation
import Testing
@testable import EmberStorage

/// A batch of entries applied in one transaction appends each trigger group's records after the
/// position the batch's previous write left (`TriggerTails`), without reading the group's
/// summary and end again: the rows stored are those of the same entries applied one
/// transaction each, through the headroom running out (a trigger past its retention limit),
/// cursor and definition entries between the writes, and an onDisconnect run whose writes share
/// one record. Each write's result says which group's lanes it reaches (`TriggerReach`).
@Suite(.printsSeedOnFailure) struct TriggerTailsTests {
    static let defs = #"""
    {"msgs": {"path": "/messages/{id}", "on": ["created", "updated"], "url": "http://127.0.0.1:9/h", "secret": "0123456789abcdef"},
     "msgs2": {"path": "/messages/{id}", "on": ["created", "updated"], "url": "http://127.0.0.1:9/h2", "secret": "0123456789abcdef"},
     "likes": {"path": "/rooms/{room}/likes/{uid}", "on": ["written"], "url": "http://127.0.0.1:9/l", "secret": "0123456789abcdef",
               "retainEntries": 3}}
    """#
    /// The definitions again with `msgs2` on other kinds: it leaves the group mid-batch.
    static let redefined = #"""
    {"msgs": {"path": "/messages/{id}", "on": ["created", "updated"], "url": "http://127.0.0.1:9/h", "secret": "0123456789abcdef"},
     "msgs2": {"path": "/messages/{id}", "on": ["deleted"], "url": "http://127.0.0.1:9/h2", "secret": "0123456789abcdef"},
     "likes": {"path": "/rooms/{room}/likes/{uid}", "on": ["written"], "url": "http://127.0.0.1:9/l", "secret": "0123456789abcdef",
               "retainEntries": 3}}
    """#
    static let session = OnDisconnectSession(node: "n1", incarnation: "i1", id: "c-1")

    static func group(_ text: String, _ name: String) throws -> UInt64 {
        try #require(try TriggerSet(text: text).definitions.first { $0.name == name }).group
    }

    /// Seeded writes over both patterns and elsewhere, with cursor entries, a redefinition and
    /// an onDisconnect run among them.
    static func history(_ g: inout SplitMix64) throws -> [(String, WriteOperation)] {
        let msgs = try group(defs, "msgs"), likes = try group(defs, "likes")
        var ops: [(String, WriteOperation)] = [("t", .triggers(.define(text: defs)))]
        // More `likes` records than its retention limit before any cursor: past it, mid-batch.
        for u in 0..<5 { ops.append(("t", .set(path: p("/rooms/burst/likes/u\(u)"), value: j("true")))) }
        for k in 0..<160 {
            let op: WriteOperation
            switch Int.random(in: 0..<10, using: &g) {
            case 0...3: op = .set(path: p("/messages/m\(Int.random(in: 0..<30, using: &g))"), value: j(#"{"n":\#(k)}"#))
            case 4, 5: op = .set(path: p("/rooms/r\(Int.random(in: 0..<3, using: &g))/likes/u\(Int.random(in: 0..<5, using: &g))"), value: j("\(k)"))
            case 6: op = .update(path: p("/"), values: [(p("messages/m\(Int.random(in: 0..<30, using: &g))/n"), j("\(k)")),
                                                        (p("rooms/r\(k % 3)/likes/v\(k)"), j("true"))])
            case 7: op = .set(path: p("/elsewhere/x\(k % 4)"), value: j("\(k)"))
            case 8: op = .set(path: p("/messages/m\(Int.random(in: 0..<30, using: &g))"), value: .null)
            default:
                // A cursor entry: what the delivery worker logs (any index so far; the apply
                // keeps the highest, and prunes the records every trigger of a group read).
                let through = UInt64(Int.random(in: 1...(ops.count), using: &g))
                op = .triggers(.advance([TriggerCursor(name: "msgs", group: msgs, through: through, rows: []),
                                                  TriggerCursor(name: "likes", group: likes, through: through, rows: [])]))
            }
            ops.append(("t", op))
            if k == 80 { ops.append(("t", .triggers(.define(text: redefined)))) }
        }
        // Two writes of one onDisconnect run at one index: one record for both.
        ops.append((OnDisconnectTable.namespace, .onDisconnect(.holder(node: "n1", incarnation: "i1"))))
        ops.append(("t", .onDisconnect(.register(session: session, write: .set(path: p("/messages/od1"), value: j("1"))))))
        ops.append(("t", .onDisconnect(.register(session: session, write: .set(path: p("/messages/od2"), value: j("2"))))))
        ops.append(("t", .set(path: p("/messages/after"), value: j("1"))))
        ops.append(("t", .onDisconnect(.run(session: session))))
        ops.append(("t", .set(path: p("/messages/last"), value: j("1"))))
        return ops
    }

    /// Every row under `triggers/`, as "key = value" lines in key order.
    static func triggerRows(_ s: EmberStore) throws -> [String] {
        try s.withRead { t in
            var out: [String] = []
            try t.scanTriggerRows(s.tables, prefix: TriggerKeys.prefix) { k, v in
                out.append("\(k.map { String(format: "%02x", $0) }.joined()) = \(v.map { String(format: "%02x", $0) }.joined())")
                return true
            }
            return out
        }
    }

    @Test func oneTransactionWritesTheRowsOfOneTransactionPerEntry() async throws {
        var g = TestSeed.generator(0x7a11_5eed)
        let ops = try Self.history(&g)
        let entries = ops.enumerated().map { i, o in
            LogEntry(index: UInt64(i + 1), term: 1, namespace: o.0, operation: o.1, timestamp: 1_000 + Int64(i))
        }
        var o = smallOptions()
        o.maxBatchEntries = entries.count
        let one = try openStore(tempDir(), o), each = try openStore(tempDir(), o)
        defer { one.close(); each.close() }
        let batched = try await one.appendAndApply(entries: entries, through: UInt64(entries.count))
        var single: [WriteResult] = []
        for e in entries { single += try await each.appendAndApply(entries: [e], through: e.index) }
        #expect(batched.count == entries.count && single.count == entries.count)
        #expect(batched.map(\.outcome) == single.map(\.outcome))
        #expect(batched.map(\.triggerReach) == single.map(\.triggerReach))
        let rows = try Self.triggerRows(one)
        #expect(rows == (try Self.triggerRows(each)))

        // The history reached what it is about: the `likes` trigger past its retention limit
        // (its gap recorded), records pruned by cursors, and the run's two writes in one record.
        let likes = try #require(try one.triggers(namespace: "t").first { $0.definition.name == "likes" }).state
        #expect(likes.skipped > 0 && likes.gapFirst > 0)
        let msgs = try Self.group(Self.defs, "msgs")
        let run = UInt64(entries.count - 1)
        let read = try one.triggerOutboxRead(namespace: "t", trigger: "msgs", after: run - 1, limit: 1)
        #expect(read.rows.first?.index == run && read.rows.first?.events.map(\.location) == [p("/messages/od1"), p("/messages/od2")])
        #expect(read.group == msgs)
    }

    /// A set or an update names the one group it gave records to, or none; a cursor entry says
    /// so; writes of several groups and any other entry reach the namespace's lanes.
    @Test func eachWriteSaysWhichLanesItReaches() async throws {
        let s = try openStore()
        defer { s.close() }
        let d = try await s.submit(namespace: "t", .triggers(.define(text: Self.defs)))
        #expect(d.triggerReach == .namespace)
        let msgs = try Self.group(Self.defs, "msgs"), likes = try Self.group(Self.defs, "likes")
        #expect(msgs != likes && msgs != 0 && likes != 0)
        let a = try await s.set("/messages/m1", #"{"n":1}"#)
        let b = try await s.set("/rooms/r/likes/u", "true")
        let c = try await s.set("/elsewhere", "1")
        let unchanged = try await s.set("/messages/m1", #"{"n":1}"#)
        let both = try await s.update("/", [("messages/m2", "1"), ("rooms/r/likes/v", "1")])
        let deleted = try await s.set("/messages/m2", "null")  // msgs and msgs2 fire on created and updated only
        #expect(a.triggerReach == .group(msgs) && b.triggerReach == .group(likes))
        #expect(c.triggerReach == .none && unchanged.triggerReach == .none && deleted.triggerReach == .none)
        #expect(both.triggerReach == .namespace)
        // A cursor entry moves cursors only: the lanes look, and may read before its commit.
        let cursor = try await s.submit(namespace: "t", .triggers(.advance([TriggerCursor(name: "msgs", group: msgs, through: a.index, rows: [])])))
        #expect(cursor.triggerReach == .cursors)
        let paused = try await s.submit(namespace: "t", .triggers(.pause(name: "msgs")))
        #expect(paused.triggerReach == .namespace)
    }

    /// The first groups' tails are searched in order (compared, not hashed), the others in a
    /// table: seeded notes, advances, forgets and lookups over more groups of two namespaces
    /// than are searched in order read what a plain table of the newest notes holds.
    @Test func tailsReadAsAPlainTableWould() {
        var g = TestSeed.generator(0x7a_11e5)
        let tails = TriggerTails()
        var model: [TriggerTails.Key: TriggerTails.Tail] = [:]
        let keys = (0..<(TriggerTails.smallGroups + 8)).map { (["t", "u"][$0 % 2], UInt64($0 / 2)) }
        for step in 0..<20_000 {
            if step % 5_000 == 0 {
                // Every group noted: the table holds those past the ones searched in order.
                for (ns, group) in keys {
                    let tail = TriggerTails.Tail(summary: .init(), last: .init(index: UInt64(step), records: 1, bytes: 1, events: 1),
                                                 prefix: TriggerRecordRows.stream(ns, group))
                    tails.note(ns, group, tail)
                    model[TriggerTails.Key(ns: ns, group: group)] = tail
                }
            }
            // Mostly a few groups, as a batch's writes; sometimes any.
            let (ns, group) = keys[Int.random(in: 0..<(Int.random(in: 0..<4, using: &g) == 0 ? keys.count : 3), using: &g)]
            let key = TriggerTails.Key(ns: ns, group: group)
            switch Int.random(in: 0..<10, using: &g) {
            case 0...4:
                let tail = TriggerTails.Tail(summary: .init(), last: .init(index: UInt64(step), records: UInt64(step), bytes: 0, events: 0),
                                             prefix: TriggerRecordRows.stream(ns, group))
                tails.note(ns, group, tail)
                model[key] = tail
            case 5: tails.forget(ns, group); model[key] = nil
            case 6 where Int.random(in: 0..<200, using: &g) == 0: tails.forgetAll(); model = [:]
            case 7, 8:
                let last = TriggerChangeLog.Position(index: UInt64(step), records: 0, bytes: UInt64(step), events: 1)
                #expect(tails.advance(ns, group, to: last) == (model[key] != nil), "step \(step)")
                model[key]?.last = last
            default: break
            }
            for (n, gr) in keys {
                let got = tails.tail(n, gr), want = model[TriggerTails.Key(ns: n, group: gr)]
                #expect(got?.last == want?.last && got?.prefix == want?.prefix, "step \(step) \(n) \(gr)")
            }
            #expect(tails.isEmpty == model.isEmpty)
        }
        #expect(model.count > TriggerTails.smallGroups / 2)
    }
}
