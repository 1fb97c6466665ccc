import EmberCore
import Foundation
import Synchronization
import Testing
@testable import EmberClient

/// The SDK's smaller surface: `children` enumeration, `useEmulator`, `FIREBASE_DATABASE_EMULATOR_HOST`,
/// `reference(fromURL:)`, `purgeOutstandingWrites`, logging and the async single-event form.
@Suite(.timeLimit(.minutes(1))) struct SDKSurfaceTests {
    @Test func childrenEnumerateLikeTheSDKsNSEnumerator() async throws {
        let t = try await TestNamespace.make()
        let db = t.client()
        defer { db.shutdown() }
        try await t.server.restPut("scores", ns: t.ns, json: #"{"a":3,"b":1,"c":2}"#)
        let snap = try await db.reference(withPath: "scores").queryOrderedByValue().getData()
        var keys: [String] = []
        for case let child as DataSnapshot in snap.children { keys.append(child.key) }
        #expect(keys == ["b", "c", "a"])
        let e = snap.children
        #expect((e.nextObject() as? DataSnapshot)?.key == "b")
        #expect((e.allObjects as? [DataSnapshot])?.map(\.key) == ["c", "a"], "allObjects: the rest")
        #expect(e.nextObject() == nil && e.allObjects.isEmpty)
        #expect((snap.children.allObjects as! [DataSnapshot]).map { $0.value as? Int } == [1, 2, 3])
    }

    @Test func observeSingleEventAndPreviousSiblingKeyAsync() async throws {
        let t = try await TestNamespace.make()
        let db = t.client()
        defer { db.shutdown() }
        try await t.server.restPut("list", ns: t.ns, json: #"{"a":1,"b":2,"c":3}"#)
        let list = db.reference(withPath: "list")
        let (first, prev) = await list.observeSingleEventAndPreviousSiblingKey(of: .childAdded)
        #expect(first.key == "a" && prev == nil)
        // The list stays synced, so the change below reaches a loaded view.
        let synced = Recorder()
        let keep = list.observe(.value) { _ in synced.add("value") }
        await synced.wait { !$0.isEmpty }
        async let changed = list.observeSingleEventAndPreviousSiblingKey(of: .childChanged)
        // Handles are allocated in order, each just before its registration is queued on the
        // repo: once the next one is taken, the one-shot observer is ahead of the change.
        #expect(try await eventually { list.repo.handles.isActive(keep + 1) })
        try await t.server.restPut("list/c", ns: t.ns, json: "30")
        let (snap, prevKey) = await changed
        #expect(snap.key == "c" && snap.value as? Int == 30 && prevKey == "b")
        list.removeObserver(withHandle: keep)
    }

    @Test func useEmulatorConnectsToTheGivenNodeWithTheURLsNamespace() async throws {
        let server = try await SharedServer.get()
        let ns = "emu\(UInt32.random(in: 0...UInt32.max))"
        let db = Database(url: "https://\(ns).firebaseio.com", configuration: .fastReconnect)
        defer { db.shutdown() }
        db.useEmulator(withHost: "127.0.0.1", port: server.port)
        try await withTimeout { try await db.reference(withPath: "greeting").setValue("hello") }
        #expect(try await server.restGet("greeting", ns: ns) == .string("hello"))
        // Too late once the database is in use, as in the SDK.
        #expect(throws: DatabaseError.self) { try db.emulate(host: "127.0.0.1", port: 1) }
        // URLs of this database, at the emulator or at its own host, give references.
        #expect(try db.throwingReference(fromURL: "http://127.0.0.1:\(server.port)/a/b?ns=\(ns)").description == "/a/b")
        #expect(try db.throwingReference(fromURL: "https://\(ns).firebaseio.com/x").description == "/x")
        #expect(throws: DatabaseError.self) { try db.throwingReference(fromURL: "https://other.firebaseio.com/x") }
    }

    @Test func firebaseDatabaseEmulatorHostIsHonoured() async throws {
        let server = try await SharedServer.get()
        // Parsing and the override, without touching the process environment.
        #expect(Database.hostAndPort("127.0.0.1:9000")! == ("127.0.0.1", 9000))
        #expect(Database.hostAndPort("[::1]:9001")! == ("::1", 9001))
        #expect(Database.hostAndPort("localhost") == nil)
        let ns = "envemu\(UInt32.random(in: 0...UInt32.max))"
        let direct = Database(url: "https://\(ns).europe-west1.firebasedatabase.app", configuration: .fastReconnect)
        defer { direct.shutdown() }
        direct.applyEmulatorEnvironment(["FIREBASE_DATABASE_EMULATOR_HOST": "127.0.0.1:\(server.port)"])
        #expect(direct.websocketURLs == ["ws://127.0.0.1:\(server.port)/.ws?v=5&ns=\(ns)"])
        try await withTimeout { try await direct.reference(withPath: "via").setValue("direct") }
        #expect(try await server.restGet("via", ns: ns) == .string("direct"))

        // The real variable, read by `Database.database(url:)` (set only around the call: other
        // suites in this process use `Database.database`).
        let ns2 = "envvar\(UInt32.random(in: 0...UInt32.max))"
        setenv("FIREBASE_DATABASE_EMULATOR_HOST", "127.0.0.1:\(server.port)", 1)
        let shared = Database.database(url: "https://\(ns2).firebaseio.com")
        unsetenv("FIREBASE_DATABASE_EMULATOR_HOST")
        defer { shared.shutdown() }
        try await withTimeout { try await shared.reference(withPath: "via").setValue("environment") }
        #expect(try await server.restGet("via", ns: ns2) == .string("environment"))
    }

    @Test func referenceFromURLRoundTripsAndRejectsOtherDatabases() async throws {
        let t = try await TestNamespace.make()
        let db = t.client()
        defer { db.shutdown() }
        let ref = db.reference(withPath: "users/ann/name")
        let again = try db.throwingReference(fromURL: ref.url)
        #expect(again.description == "/users/ann/name")
        try await again.setValue("Ann")
        #expect(try await t.server.restGet("users/ann/name", ns: t.ns) == .string("Ann"))
        #expect(try db.throwingReference(fromURL: t.server.databaseURL(ns: t.ns)).description == "/")
        #expect(try db.throwingReference(fromURL: "\(t.server.baseURL)/a%20b?ns=\(t.ns)").key == "a b")
        for foreign in ["\(t.server.baseURL)/x?ns=someoneelse", "http://10.1.2.3:\(t.server.port)/x?ns=\(t.ns)",
                        "http://127.0.0.1:1/x?ns=\(t.ns)", "not a url", "ftp://127.0.0.1/x"] {
            do {
                _ = try db.throwingReference(fromURL: foreign)
                Issue.record("accepted \(foreign)")
            } catch {
                #expect(error.code == .invalidData)
                #expect(error.message.contains("expected to match the configured database URL \(t.url)"))
            }
        }
    }

    @Test func purgeOutstandingWritesCancelsQueuedWritesAndRollsThemBack() async throws {
        let t = try await TestNamespace.make()
        let db = t.client()
        defer { db.shutdown() }
        let kept = db.reference(withPath: "kept")
        try await kept.setValue("server")
        let rec = Recorder()
        kept.observe(.value) { s in rec.add("value \(s.value ?? "nil")") }
        await rec.wait { $0 == ["value server"] }
        db.goOffline()
        let done = Recorder()
        kept.setValue("local 1") { error, _ in done.add("1 \((error as? DatabaseError)?.code.rawValue ?? "ok")") }
        db.reference(withPath: "other").updateChildValues(["a": 1]) { error, _ in
            done.add("2 \((error as? DatabaseError)?.code.rawValue ?? "ok")")
        }
        kept.runTransactionBlock({ data in
            data.value = "from transaction"
            return .success(withValue: data)
        }, andCompletionBlock: { error, committed, _ in
            done.add("tx \((error as? DatabaseError)?.code.rawValue ?? "ok") \(committed)")
        })
        await rec.wait { $0.last == "value from transaction" }
        db.purgeOutstandingWrites()
        let results = await done.wait(count: 3)
        #expect(Set(results) == ["1 write_canceled", "2 write_canceled", "tx write_canceled false"])
        // Local changes rolled back to the server's data.
        await rec.wait { $0.last == "value server" }
        db.goOnline()
        // Writes go out in order: once a later one is acknowledged, a purged one that had been
        // sent would have landed.
        try await withTimeout { try await db.reference(withPath: "barrier").setValue(true) }
        #expect(try await t.server.restGet("kept", ns: t.ns) == .string("server"))
        #expect(try await t.server.restGet("other", ns: t.ns) == .null)
        // Writes after the purge go through as usual.
        try await withTimeout { try await kept.setValue("after") }
        #expect(try await t.server.restGet("kept", ns: t.ns) == .string("after"))
    }

    @Test func loggingIsOffByDefaultAndShowsTrafficWhenEnabled() async throws {
        let t = try await TestNamespace.make()
        let lines = Mutex<[String]>([])
        ClientLog.sink = { line in lines.withLock { $0.append(line) } }
        defer {
            Database.setLoggingEnabled(false)
            ClientLog.sink = nil
        }
        #expect(ClientLog.enabled == false)
        let quiet = t.client()
        try await quiet.reference(withPath: "q").setValue(1)
        quiet.shutdown()
        // Other suites run concurrently: only lines about this namespace count.
        #expect(lines.withLock { $0 }.filter { $0.contains(t.ns) || $0.contains("\"q\"") }.isEmpty)

        Database.setLoggingEnabled(true)
        let loud = t.client()
        defer { loud.shutdown() }
        try await loud.reference(withPath: "logged").setValue("x")
        let all = lines.withLock { $0 }
        #expect(all.contains { $0.contains("Connecting to ws://127.0.0.1:\(t.server.port)/.ws?v=5&ns=\(t.ns)") })
        #expect(all.contains { $0.hasPrefix("[EmberClient] > ") && $0.contains("logged") })
        #expect(all.contains { $0.hasPrefix("[EmberClient] < ") })
    }
}
