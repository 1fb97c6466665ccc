import EmberTestSupport
import EmberCore
import EmberStorage
import Foundation
import Logging
import Testing

@testable import EmberCluster
@testable import EmberNodeStore
@testable import EmberServer

/// The node side of durable onDisconnect over a real LMDB store: sessions register through the
/// log, a clean end runs their writes once, and a store reopened after a crash (a new
/// incarnation) runs what the previous one left.
@Suite struct OnDisconnectKeeperTests {
    static let ns = "odc"
    func p(_ s: String) -> Path { try! Path(s) }

    static func openStore(_ dir: String) throws -> LMDBDataStore {
        var options = StoreOptions()
        options.mapSize = 1 << 28
        return try LMDBDataStore(directory: dir, options: options, logger: Logger(label: "test"))
    }

    func keeper(_ store: LMDBDataStore, _ hub: RealtimeHub) -> OnDisconnectKeeper {
        OnDisconnectKeeper(store: store.ports, realtime: hub, settings: .init(), logger: Logger(label: "test"))
    }

    /// A fresh store and keeper with one session that registered `/p/u1` = false.
    func startedSession() async throws -> (LMDBDataStore, RealtimeHub, OnDisconnectKeeper, RealtimeSession) {
        let store = try Self.openStore(TestDirectory.root + "ember-odc-\(UUID().uuidString)")
        let hub = RealtimeHub()
        let k = keeper(store, hub)
        let session = try #require(hub.open(id: "s-1", namespace: Self.ns))
        try await register(k, session, "/p/u1", .bool(false))
        return (store, hub, k, session)
    }

    func value(_ store: LMDBDataStore, _ path: String) throws -> Node {
        try store.reader.read(namespace: Self.ns, path: p(path)).node
    }

    func register(_ k: OnDisconnectKeeper, _ session: RealtimeSession, _ path: String, _ json: JSON) async throws {
        try await k.register(WriteRequest(namespace: Self.ns, path: p(path), kind: .set(json), identity: session.identity),
                             for: session)
    }

    @Test func aCleanEndRunsTheWritesOnce() async throws {
        let (store, hub, k, session) = try await startedSession()
        defer { store.close() }
        try await register(k, session, "/runs", .object([".sv": .object(["increment": .int(1)])]))
        let book = store.ports.onDisconnect
        #expect(try book.holders() == ["single": k.incarnation])
        #expect(try book.sessions(limit: 10) { _, _, _, _ in true }.count == 1)
        #expect(try value(store, "/p/u1").isEmpty)

        hub.close(session)
        await k.ended(session)
        #expect(try value(store, "/p/u1") == Node(.bool(false)) && value(store, "/runs") == Node(.int(1)))
        #expect(try book.sessions(limit: 10) { _, _, _, _ in true }.isEmpty)
        // Ending it again (or the own-session sweep) runs nothing more.
        await k.ended(session)
        for _ in 0..<10 { await k.poll() }
        #expect(try value(store, "/runs") == Node(.int(1)))
    }

    @Test func theNextStartRunsWhatACrashLeft() async throws {
        let dir = TestDirectory.root + "ember-odc-\(UUID().uuidString)"
        do {
            let store = try Self.openStore(dir)
            let hub = RealtimeHub()
            let k = keeper(store, hub)
            let session = try #require(hub.open(id: "s-1", namespace: Self.ns))
            try await register(k, session, "/p/u1", .bool(false))
            try await register(k, session, "/gone", .int(1))
            // `oc` drops a write everywhere.
            try await k.cancel(at: p("/gone"), for: session)
            session.cancelOnDisconnect(at: p("/gone"))
            // The process dies here: the session never ends cleanly.
            store.close()
        }
        let store = try Self.openStore(dir)
        defer { store.close() }
        let k = keeper(store, RealtimeHub())
        #expect(try value(store, "/p/u1").isEmpty)
        await k.poll()
        #expect(try value(store, "/p/u1") == Node(.bool(false)) && value(store, "/gone").isEmpty)
        let book = store.ports.onDisconnect
        #expect(try book.sessions(limit: 10) { _, _, _, _ in true }.isEmpty)
        #expect(try book.holders() == ["single": k.incarnation])
    }

    @Test func anIdleStartLogsNothing() async throws {
        let store = try Self.openStore(TestDirectory.root + "ember-odc-\(UUID().uuidString)")
        defer { store.close() }
        let k = keeper(store, RealtimeHub())
        let before = store.appliedIndex
        for _ in 0..<3 { await k.poll() }
        #expect(store.appliedIndex == before)
    }

    @Test func aSealedIncarnationRegistersNothingAndDropsItsConnections() async throws {
        let (store, hub, k, session) = try await startedSession()
        defer { store.close() }
        let sealed = k.incarnation
        // As a leader does when this node was silent past the lease.
        #expect(try await store.ports.onDisconnect.log(.seal(node: "single", incarnation: sealed),
                                                     namespace: OnDisconnectCommand.bookkeepingNamespace, identity: .admin))
        await #expect(throws: StoreUnavailable.self) { try await register(k, session, "/p/u2", .bool(false)) }
        await k.poll()
        #expect(session.closeReason?.contains("onDisconnect") == true && hub.connectionCount == 0)
        #expect(k.incarnation != sealed)
        // Its orphaned writes run (a single node leads itself).
        await k.poll()
        #expect(try value(store, "/p/u1") == Node(.bool(false)) && value(store, "/p/u2").isEmpty)
    }
}
