import EmberTestSupport
import EmberCore
import Foundation
import Testing
@testable import EmberClient

/// Filtering queries (limits, ranges) across a restart: their last window comes from the disk.
@Suite(.timeLimit(.minutes(1))) struct PersistenceQueryTests {
    static func cacheDirectory(_ name: String) -> URL {
        URL(fileURLWithPath: TestDirectory.root + "ember-\(name)-test-" + UUID().uuidString)
    }

    /// A database with its disk cache in `dir`: opened again on the same `dir`, it is the same
    /// app restarted.
    static func persistentDatabase(_ server: EmberServerProcess, ns: String, dir: URL) -> Database {
        let db = Database(url: server.databaseURL(ns: ns), configuration: .fastReconnect)
        db.isPersistenceEnabled = true
        db.persistenceDirectory = dir
        return db
    }

    @Test func limitQueryShowsItsLastWindowWhenRestartedOffline() async throws {
        let server = try EmberServerProcess()
        try await server.start()
        defer { server.stop() }
        let ns = "window"
        try await server.restPut("scores", ns: ns, json: #"{"a":{"n":1},"b":{"n":2},"c":{"n":3},"d":{"n":0}}"#)
        let dir = Self.cacheDirectory("window")
        defer { try? FileManager.default.removeItem(at: dir) }
        func open() -> Database { Self.persistentDatabase(server, ns: ns, dir: dir) }
        let online = open()
        let rec = Recorder()
        let top = online.reference(withPath: "scores").queryOrdered(byChild: "n").queryLimited(toLast: 2)
        top.observe(.value) { s in rec.add(s.children.map { $0.key }.joined(separator: ",")) }
        await rec.wait { $0.contains("b,c") }
        // Acknowledged after the listen completed: the window is on disk and complete.
        try await online.reference(withPath: "markers/window").setValue(true)
        online.shutdown()
        server.stop()

        // Node down: the window, in query order, at once; nothing else of `scores` is known.
        let offline = open()
        defer { offline.shutdown() }
        let again = Recorder()
        let query = offline.reference(withPath: "scores").queryOrdered(byChild: "n").queryLimited(toLast: 2)
        query.observe(.value) { s in again.add(s.children.map { $0.key }.joined(separator: ",")) }
        query.observe(.childAdded) { s in again.add("added \(s.key)") }
        await again.wait { $0.contains("b,c") && $0.contains("added b") && $0.contains("added c") }
        #expect(!again.all.contains("added a") && !again.all.contains("added d"))
        // getData on a fresh query object of the same window falls back to the stored window
        // once the connection attempt times out.
        let read = try await offline.reference(withPath: "scores").queryOrdered(byChild: "n").queryLimited(toLast: 2).getData()
        #expect(read.children.map { $0.key } == ["b", "c"])
        // A plain listener at the path has no complete data: no value event from the window.
        let plain = Recorder()
        offline.reference(withPath: "scores").observe(.value) { s in plain.add("\(s.childrenCount)") }
        await offline.eventsDelivered()
        #expect(plain.all.isEmpty)
    }

    @Test func getDataAnswersAreKeptForAnOfflineRestart() async throws {
        let server = try EmberServerProcess()
        try await server.start()
        defer { server.stop() }
        let ns = "readcache"
        try await server.restPut("profile", ns: ns, json: #"{"name":"ada","age":36}"#)
        try await server.restPut("scores", ns: ns, json: #"{"a":{"n":1},"b":{"n":2},"c":{"n":3}}"#)
        let dir = Self.cacheDirectory("readcache")
        defer { try? FileManager.default.removeItem(at: dir) }
        func open() -> Database { Self.persistentDatabase(server, ns: ns, dir: dir) }
        // Online: two one-time reads, no listener anywhere.
        let online = open()
        let profile = try await online.reference(withPath: "profile").getData()
        #expect(profile.childSnapshot(forPath: "name").value as? String == "ada")
        let top = try await online.reference(withPath: "scores").queryOrdered(byChild: "n").queryLimited(toLast: 1).getData()
        #expect(top.children.map { $0.key } == ["c"])
        online.shutdown()
        server.stop()

        // Node down: both answers come from the disk.
        let offline = open()
        defer { offline.shutdown() }
        let again = try await offline.reference(withPath: "profile").getData()
        #expect(again.childSnapshot(forPath: "age").value as? Int == 36)
        let window = try await offline.reference(withPath: "scores").queryOrdered(byChild: "n").queryLimited(toLast: 1).getData()
        #expect(window.children.map { $0.key } == ["c"])
        // The whole data read at `profile` is complete: a listener gets it at once, also below.
        let rec = Recorder()
        offline.reference(withPath: "profile/name").observe(.value) { s in rec.add("\(s.value ?? "nil")") }
        await rec.wait { $0.contains("ada") }
        // The window is not whole data at `scores`: a plain read there has nothing to answer with.
        await #expect(throws: (any Error).self) { _ = try await offline.reference(withPath: "scores").getData() }
    }
}
