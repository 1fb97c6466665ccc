import EmberCore
import Foundation
import Testing
@testable import EmberClient

/// Offline writes, reconnect and rollback against emberd processes this suite starts and stops.
@Suite(.timeLimit(.minutes(1))) struct OfflineIntegrationTests {
    @Test func writesMadeWhileTheServerIsDownLandInOrderAfterItReturns() async throws {
        let server = try EmberServerProcess()
        try await server.start()
        defer { server.stop() }
        let ns = "offline"
        let db = Database(url: server.databaseURL(ns: ns), configuration: .fastReconnect)
        defer { db.shutdown() }
        let rec = Recorder()
        db.reference(withPath: ".info/connected").observe(.value) { s in rec.add("connected \(s.value as? Bool ?? false)") }
        let list = db.reference(withPath: "log")
        list.observe(.value) { s in rec.add("log \(s.childrenCount)") }
        await rec.wait { $0.contains("connected true") && $0.contains("log 0") }
        // Acknowledged before the stop: survives the restart (LMDB store).
        try await db.reference(withPath: "before").setValue("kept")

        server.stop()
        await rec.wait { $0.last == "connected false" }
        // Local events fire at once while offline.
        var keys: [String] = []
        for i in 0..<5 {
            let child = list.childByAutoId()
            keys.append(child.key!)
            withoutWaiting { child.setValue(["n": i]) }
        }
        withoutWaiting {
            list.child(keys[0]).child("n").setValue(100)
            list.child(keys[1]).removeValue()
        }
        await rec.wait { $0.contains("log 5") && $0.last == "log 4" }
        let acked = Recorder()
        db.reference(withPath: "final").setValue("done") { error, _ in acked.add("final \(error == nil)") }

        // Same port and data directory.
        try await server.start()
        await rec.wait(timeout: .seconds(15)) { $0.last?.hasPrefix("connected true") == true || $0.contains("connected true") }
        await acked.wait(timeout: .seconds(15)) { $0 == ["final true"] }
        let stored = try await server.restGet("log", ns: ns)
        let obj = try #require(stored.objectValue)
        #expect(obj.keys.sorted() == [keys[0], keys[2], keys[3], keys[4]].sorted())
        #expect(stored[keys[0]]?["n"] == .int(100))
        #expect(try await server.restGet("final", ns: ns) == .string("done"))
        #expect(try await server.restGet("before", ns: ns) == .string("kept"))
    }

    /// A compare-and-set the server rejects (`datastale`) is rolled back with events, and the
    /// transaction reruns on the server's value. (emberd enforces no security rules yet, so a
    /// `permission_denied` rollback is covered with a scripted server in `RepoScriptedServerTests`.)
    @Test func rejectedTransactionIsRolledBackWithEventsAndRerun() async throws {
        let t = try await TestNamespace.make()
        let db = t.client()
        defer { db.shutdown() }
        let ref = db.reference(withPath: "counter")
        try await ref.setValue(1)
        let rec = Recorder()
        ref.observe(.value) { s in rec.add("\(s.value as? Int ?? -1)") }
        await rec.wait { $0 == ["1"] }
        db.goOffline()
        try await t.server.restPut("counter", ns: t.ns, json: "5")
        let done = Recorder()
        ref.runTransactionBlock({ data in
            // Only moves 1 → 2; anything else is left alone.
            guard data.value as? Int == 1 else { return .abort() }
            data.value = 2
            return .success(withValue: data)
        }, andCompletionBlock: { error, committed, snap in
            done.add("\(error == nil) \(committed) \(snap?.value as? Int ?? -1)")
        })
        await rec.wait { $0 == ["1", "2"] }
        db.goOnline()
        await done.wait { $0 == ["true false 5"] }
        await rec.wait { $0 == ["1", "2", "5"] }
        #expect(try await t.server.restGet("counter", ns: t.ns) == .int(5))
    }

    @Test func getDataFallsBackToTheCacheWhenOfflineAndFailsWithout() async throws {
        let t = try await TestNamespace.make()
        let db = t.client()
        defer { db.shutdown() }
        let ref = db.reference(withPath: "cached")
        try await ref.setValue("yes")
        let rec = Recorder()
        ref.observe(.value) { s in rec.add("\(s.value as? String ?? "nil")") }
        await rec.wait { $0 == ["yes"] }
        db.goOffline()
        let snap = try await withTimeout { try await ref.getData() }
        #expect(snap.value as? String == "yes")
        await #expect(throws: DatabaseError.self) {
            _ = try await withTimeout { try await db.reference(withPath: "uncached").getData() }
        }
        // observeSingleEvent answers from the cache while offline.
        let once = try await withTimeout { await ref.observeSingleEvent(of: .value) }
        #expect(once.value as? String == "yes")
    }
}
