import EmberTestSupport
import EmberCore
import Foundation
import Testing
@testable import EmberClient

/// Cache pruning with a real emberd: past `persistenceCacheSizeBytes`, least recently used data
/// nobody listens to goes; listened and keepSynced paths stay, and a restarted offline client
/// still shows them.
@Suite(.timeLimit(.minutes(2))) struct PersistencePruningTests {
    /// About 300 KB of JSON: four of them are over the 1 MB limit, three are not.
    static let bigJSON: String = {
        let value = String(repeating: "v", count: 10_000)
        return "{" + (0..<30).map { "\"k\($0)\":\"\(value)\"" }.joined(separator: ",") + "}"
    }()

    @Test func pruningDropsLeastRecentlyUsedDataAndKeepsListenedAndKeptPaths() async throws {
        let server = try EmberServerProcess()
        try await server.start()
        defer { server.stop() }
        let ns = "prune"
        for name in ["p1", "p2", "p3", "p4"] { try await server.restPut("big/\(name)", ns: ns, json: Self.bigJSON) }
        let dir = URL(fileURLWithPath: TestDirectory.root + "ember-prune-test-" + UUID().uuidString)
        defer { try? FileManager.default.removeItem(at: dir) }

        let db = Database(url: server.databaseURL(ns: ns), configuration: .fastReconnect)
        db.isPersistenceEnabled = true
        db.persistenceDirectory = dir
        db.persistenceCacheSizeBytes = 1024 * 1024
        let rec = Recorder()
        // p1: an active listener; p2: kept synced; p3 then p4: listened to once, then released.
        db.reference(withPath: "big/p1").observe(.value) { s in rec.add("p1 \(s.childrenCount)") }
        db.reference(withPath: "big/p2").keepSynced(true)
        await rec.wait { $0.contains("p1 30") }
        for name in ["p3", "p4"] {
            let ref = db.reference(withPath: "big/\(name)")
            let handle = ref.observe(.value) { s in rec.add("\(name) \(s.childrenCount)") }
            await rec.wait { $0.contains("\(name) 30") }
            // Acknowledged after the listen completed: its data is on disk and complete.
            try await db.reference(withPath: "markers/\(name)").setValue(true)
            ref.removeObserver(withHandle: handle)
        }

        let repo = db.repo
        let store = try #require(repo.persistence?.store)
        func cached(_ name: String) throws -> Node? {
            try repo.queue.sync { try store.serverCache(at: try Path("big/\(name)")) }
        }
        let pruned = try await eventually { try cached("p3") == nil }
        #expect(pruned)
        #expect(try cached("p1")?.childCount == 30)
        #expect(try cached("p2")?.childCount == 30)
        #expect(try cached("p4")?.childCount == 30)
        let size = try repo.queue.sync { try store.serverCacheSize() }
        #expect(size <= 1024 * 1024)
        db.shutdown()
        server.stop()

        // Restarted with the node down: the listened path comes from the disk at once.
        let again = Database(url: server.databaseURL(ns: ns), configuration: .fastReconnect)
        again.isPersistenceEnabled = true
        again.persistenceDirectory = dir
        defer { again.shutdown() }
        let offline = Recorder()
        again.reference(withPath: "big/p1").observe(.value) { s in offline.add("p1 \(s.childrenCount)") }
        again.reference(withPath: "big/p2").observeSingleEvent(of: .value) { s in offline.add("p2 \(s.childrenCount)") }
        await offline.wait { $0.contains("p1 30") && $0.contains("p2 30") }
    }
}
