import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// A write's apply reads each trigger pattern once (`TriggerSet.plan`): per pattern one diff,
/// one shared record per group on it (triggers firing on the same kinds), one row per feed;
/// triggers on other patterns cost nothing. Real LMDB stores.
@Suite struct TriggerWritePlanTests {
    typealias T = TriggerSharedRecordTests

    @Test func eachGroupOfAPatternGetsOneRecordAndEachFeedItsRow() async throws {
        let s = try openStore()
        try await T().op(s, .define(text: T.defs([
            ("a", T.trigger("/m/{id}", on: "created")), ("b", T.trigger("/m/{id}", on: "created")),
            ("c", T.trigger("/m/{id}", on: "written")), ("f", #"{"path": "/m/{id}", "on": ["written"], "feed": true}"#),
            ("n", T.trigger("/n/{x}", on: "written")),
        ])))
        let set = try s.triggerSet(namespace: "t")
        #expect(set.plan.map(\.pattern.description) == ["/m/{id}", "/n/{x}"])
        #expect(set.plan[0].groups.map(\.name) == ["a", "c"] && set.plan[0].feeds.map(\.name) == ["f"])
        #expect(set.plan[1].groups.map(\.name) == ["n"] && set.plan[1].feeds.isEmpty)
        let group = { (n: String) in set.definition(named: n)!.group }
        #expect(group("a") == group("b") && group("a") != group("c"))

        let created = try await s.set("/m/k1", "1").index
        let updated = try await s.set("/m/k1", "2").index
        let two = try await s.update("/", [("m/k2", "3"), ("m/k3", "4")]).index
        let other = try await s.set("/o/z", "5").index
        #expect(try T().records(s, group("a")) == [created, two])
        #expect(try T().records(s, group("c")) == [created, updated, two])
        #expect(try T().records(s, group("n")).isEmpty)
        #expect(other > two)

        func read(_ name: String) throws -> [(UInt64, [String])] {
            try s.triggerOutboxRead(namespace: "t", trigger: name, after: nil, limit: 100).rows.map { r in
                (r.index, r.events.map { "\($0.id) \($0.type.rawValue) \($0.location) \($0.params["id"] ?? "")" })
            }
        }
        let a = try read("a")
        #expect(a.map(\.0) == [created, two])
        #expect(a.map(\.1) == [["\(created)-0 created /m/k1 k1"], ["\(two)-0 created /m/k2 k2", "\(two)-1 created /m/k3 k3"]])
        #expect(try read("b").map(\.1) == a.map(\.1))
        let c = try read("c")
        #expect(c.map(\.1) == [["\(created)-0 written /m/k1 k1"], ["\(updated)-0 written /m/k1 k1"],
                               ["\(two)-0 written /m/k2 k2", "\(two)-1 written /m/k3 k3"]])
        #expect(try read("f").map(\.1) == c.map(\.1))
        #expect(try read("n").isEmpty)
        // Values before and after, as the events carry them.
        let firstC = try #require(try s.triggerOutboxRead(namespace: "t", trigger: "c", after: created, limit: 1).rows.first?.events.first)
        #expect(firstC.before == .int(1) && firstC.after == .int(2))
    }

    /// Triggers on different lists (the index picks the patterns by a write's first key): each
    /// write gets a record in the groups it changes, a wildcard-first pattern sees every list,
    /// and a multi-path update at the root reaches the patterns of every list it touches.
    @Test func triggersOnDifferentListsEachGetTheirListsWrites() async throws {
        let s = try openStore()
        try await T().op(s, .define(text: T.defs([
            ("m", T.trigger("/messages/{id}", on: "created")), ("o", T.trigger("/orders/{id}", on: "created")),
            ("u", T.trigger("/users/{uid}", on: "created")), ("any", T.trigger("/{list}/{id}", on: "created")),
        ])))
        let set = try s.triggerSet(namespace: "t")
        let group = { (n: String) in set.definition(named: n)!.group }
        let m1 = try await s.set("/messages/a", "1").index
        let o1 = try await s.set("/orders/b", "2").index
        let both = try await s.update("/", [("users/c", "3"), ("messages/d", "4")]).index
        let none = try await s.set("/logs/e", "5").index
        #expect(try T().records(s, group("m")) == [m1, both])
        #expect(try T().records(s, group("o")) == [o1])
        #expect(try T().records(s, group("u")) == [both])
        #expect(try T().records(s, group("any")) == [m1, o1, both, none])
        let events = try s.triggerOutboxRead(namespace: "t", trigger: "any", after: o1, limit: 10).rows.first?.events ?? []
        #expect(events.map { "\($0.location) \($0.params["list"] ?? "")" } == ["/messages/d messages", "/users/c users"])
    }
}
