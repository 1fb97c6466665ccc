import EmberTestSupport
import EmberCore
import EmberStorage
import Foundation
import Testing

@testable import EmberNodeStore

/// What the delivery worker is told of each commit (`TriggersPort.onTriggerCommit`, over a
/// real LMDB store): a write wakes the lanes of the one group it gave a record to, none when it
/// fired nothing; definitions and cursors, and writes of several groups, wake every lane of
/// their namespace; a port that cannot tell wakes every lane.
@Suite struct TriggerCommitTests {
    static let defs = #"""
    {"msgs": {"path": "/messages/{id}", "on": ["created"], "url": "http://127.0.0.1:9/h", "secret": "0123456789abcdef"},
     "likes": {"path": "/rooms/{room}/likes/{uid}", "on": ["written"], "url": "http://127.0.0.1:9/l", "secret": "0123456789abcdef"}}
    """#

    /// Submits one entry and returns the commit it made (each is awaited: one commit each).
    static func commit(_ store: EmberStore, _ op: WriteOperation, _ next: inout AsyncStream<TriggerCommit>.Iterator) async throws -> TriggerCommit {
        _ = try await store.submit(namespace: "t", op)
        return try #require(await next.next())
    }

    @Test func aCommitWakesTheLanesOfTheGroupsItRecordedFor() async throws {
        let dir = TestDirectory.root + "ember-trigger-commit-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var options = StoreOptions()
        options.mapSize = 1 << 30
        let store = try EmberStore(directory: dir, options: options)
        defer { store.close() }
        let port = LMDBTriggers(store: store)
        let (commits, continuation) = AsyncStream<TriggerCommit>.makeStream()
        port.onTriggerCommit { continuation.yield($0) }
        var next = commits.makeAsyncIterator()
        let defined = try await Self.commit(store, .triggers(.define(text: Self.defs)), &next)
        let set = try TriggerSet(text: Self.defs)
        let msgs = try #require(set.definitions.first { $0.name == "msgs" }).group
        let likes = try #require(set.definitions.first { $0.name == "likes" }).group
        #expect(defined.wakes(namespace: "t", group: msgs) && defined.wakes(namespace: "t", group: likes))
        #expect(!defined.wakes(namespace: "u", group: msgs))

        let m = try await Self.commit(store, .set(path: try Path("/messages/m1"), value: .int(1)), &next)
        #expect(m.wakes(namespace: "t", group: msgs) && !m.wakes(namespace: "t", group: likes))
        let l = try await Self.commit(store, .set(path: try Path("/rooms/r/likes/u"), value: .bool(true)), &next)
        #expect(l.wakes(namespace: "t", group: likes) && !l.wakes(namespace: "t", group: msgs))
        // An update of a created message: msgs fires on created only.
        let none = try await Self.commit(store, .set(path: try Path("/messages/m1"), value: .int(2)), &next)
        #expect(none.isEmpty && !none.wakes(namespace: "t", group: msgs))
        let both = try await Self.commit(store, .update(path: .root, values: [(try Path("messages/m2"), .int(1)), (try Path("rooms/r/likes/v"), .int(1))]), &next)
        #expect(both.wakes(namespace: "t", group: msgs) && both.wakes(namespace: "t", group: likes))
        let cursor = try await Self.commit(store, .triggers(.advance([TriggerCursor(name: "msgs", group: msgs, through: 2, rows: [])])), &next)
        #expect(cursor.wakes(namespace: "t", group: likes))
        // Only entries that may change a trigger's flags make its lanes read them again.
        #expect(defined.changesState(namespace: "t") && !defined.changesState(namespace: "u"))
        #expect(!m.changesState(namespace: "t") && !l.changesState(namespace: "t") && !cursor.changesState(namespace: "t"))
        let paused = try await Self.commit(store, .triggers(.pause(name: "msgs")), &next)
        #expect(paused.changesState(namespace: "t") && paused.wakes(namespace: "t", group: msgs))
        let resumed = try await Self.commit(store, .triggers(.resume(name: "msgs")), &next)
        #expect(resumed.changesState(namespace: "t"))
        let halted = try await Self.commit(store, .triggers(.halt(name: "likes", reason: "test")), &next)
        #expect(halted.changesState(namespace: "t") && TriggerCommit.all.changesState(namespace: "v"))

        // Commits of several entries: what any of them reaches.
        let many = TriggerCommit([(namespace: "t", reach: TriggerReach.group(msgs)), (namespace: "t", reach: .none),
                                  (namespace: "t", reach: .group(msgs)), (namespace: "u", reach: .namespace)])
        #expect(many.wakes(namespace: "t", group: msgs) && !many.wakes(namespace: "t", group: likes))
        #expect(many.wakes(namespace: "u", group: likes) && !many.wakes(namespace: "v", group: msgs))
        #expect(!many.wakes(namespace: "t", group: 0) && TriggerCommit.all.wakes(namespace: "v", group: 7))
        #expect(TriggerCommit([(namespace: "t", reach: TriggerReach.none)]).isEmpty && !TriggerCommit.all.isEmpty)
    }
}
