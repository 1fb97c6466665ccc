import EmberCore
import Foundation
import Testing
@testable import EmberClient

/// The seeds' read/write scenarios against a real emberd.
@Suite(.timeLimit(.minutes(1))) struct RealtimeIntegrationTests {
    @Test func fanOutPostIsSeenAtomicallyByListenersOnBothLocations() async throws {
        let t = try await TestNamespace.make()
        let writer = t.client(), reader = t.client()
        defer { writer.shutdown(); reader.shutdown() }
        let rec = Recorder()
        reader.reference().child("posts").observe(.childAdded) { s in rec.add("posts \(s.key) \(s.childSnapshot(forPath: "title").value as? String ?? "")") }
        reader.reference().child("user-posts/u1").observe(.childAdded) { s in rec.add("user-posts \(s.key)") }
        // The root value listener sees both locations change in one event.
        reader.reference().observe(.value) { s in
            rec.add("root posts=\(s.childSnapshot(forPath: "posts").childrenCount) user=\(s.childSnapshot(forPath: "user-posts/u1").childrenCount)")
        }
        await rec.wait { $0.contains("root posts=0 user=0") }

        let key = try #require(writer.reference().child("posts").childByAutoId().key)
        let post: [String: Any] = ["uid": "u1", "author": "ann", "title": "Hello", "body": "First"]
        try await writer.reference().updateChildValues(["/posts/\(key)": post, "/user-posts/u1/\(key)/": post])
        let seen = await rec.wait { $0.contains("posts \(key) Hello") && $0.contains("user-posts \(key)") && $0.contains("root posts=1 user=1") }
        #expect(!seen.contains("root posts=1 user=0") && !seen.contains("root posts=0 user=1"), "atomic: \(seen)")
        let rest = try await t.server.restGet("user-posts/u1/\(key)/author", ns: t.ns)
        #expect(rest == .string("ann"))
    }

    @Test func restWriteIsSeenByASwiftListener() async throws {
        let t = try await TestNamespace.make()
        let db = t.client()
        defer { db.shutdown() }
        let rec = Recorder()
        db.reference(withPath: "users/tom").observe(.value) { s in rec.add(s.json) }
        await rec.wait { $0 == ["null"] }
        try await t.server.restPut("users/tom", ns: t.ns, json: #"{"username":"tom","age":30}"#)
        await rec.wait { $0.last == #"{"age":30,"username":"tom"}"# }
    }

    @Test func setValueCompletionGetDataAndObserveSingleEvent() async throws {
        let t = try await TestNamespace.make()
        let db = t.client()
        defer { db.shutdown() }
        let ref = db.reference().child("users").child("u1")
        try await ref.setValue(["username": "ann"])
        let done = Recorder()
        ref.child("username").setValue("bob") { error, r in done.add("done \(error == nil) \(r.key ?? "")") }
        await done.wait { $0 == ["done true username"] }
        let snap = try await ref.child("username").getData()
        #expect(snap.value as? String == "bob")
        let missing = try await db.reference(withPath: "nothing/here").getData()
        #expect(!missing.exists())
        let once = await ref.observeSingleEvent(of: .value)
        #expect((once.value as? [String: Any])?["username"] as? String == "bob")
        try await ref.removeValue()
        #expect(try await ref.getData().exists() == false)
    }

    @Test func priorityWritesAndOrdering() async throws {
        let t = try await TestNamespace.make()
        let db = t.client()
        defer { db.shutdown() }
        let list = db.reference(withPath: "list")
        try await list.child("a").setValue("A", andPriority: 3)
        try await list.child("b").setValue("B", andPriority: 1)
        try await list.child("c").setValue(["x": 1], andPriority: 2)
        let snap = try await list.queryOrderedByPriority().getData()
        #expect(snap.children.map(\.key) == ["b", "c", "a"])
        try await list.child("a").setPriority(0)
        let again = await list.queryOrderedByPriority().observeSingleEvent(of: .value)
        #expect(again.children.map(\.key) == ["a", "b", "c"])
        #expect(again.childSnapshot(forPath: "a").priority as? Double == 0)
        let export = try await t.server.restGet("list/a", ns: t.ns)
        #expect(export == .string("A"))
    }

    @Test func removeObserverStopsDeliveryButRemoveAllKeepsChildObservers() async throws {
        let t = try await TestNamespace.make()
        let db = t.client(), writer = t.client()
        defer { db.shutdown(); writer.shutdown() }
        let rec = Recorder()
        let ref = db.reference(withPath: "room")
        let h = ref.observe(.value) { s in rec.add("v1 \(s.json)") }
        ref.observe(.value) { s in rec.add("v2 \(s.json)") }
        ref.child("msg").observe(.value) { s in rec.add("child \(s.json)") }
        try await writer.reference(withPath: "room/msg").setValue(1)
        await rec.wait { $0.contains("v1 {\"msg\":1}") && $0.contains("v2 {\"msg\":1}") && $0.contains("child 1") }
        ref.removeObserver(withHandle: h)
        try await writer.reference(withPath: "room/msg").setValue(2)
        await rec.wait { $0.contains("v2 {\"msg\":2}") && $0.contains("child 2") }
        #expect(!rec.all.contains("v1 {\"msg\":2}"))
        ref.removeAllObservers()
        try await writer.reference(withPath: "room/msg").setValue(3)
        await rec.wait { $0.contains("child 3") }
        // The removed observers' events for msg 3 would come from the same data as child 3.
        await db.eventsDelivered()
        #expect(!rec.all.contains { $0.hasPrefix("v") && $0.hasSuffix("3}") })
    }

    @Test func infoConnectedAndServerTimeOffsetAndGoOffline() async throws {
        let t = try await TestNamespace.make()
        let db = t.client()
        defer { db.shutdown() }
        let rec = Recorder()
        db.reference(withPath: ".info/connected").observe(.value) { s in rec.add("connected \(s.value as? Bool ?? false)") }
        await rec.wait { $0.contains("connected true") }
        let offset = try await db.reference(withPath: ".info/serverTimeOffset").getData()
        #expect(abs((offset.value as? Int) ?? 99_999) < 5_000)
        db.goOffline()
        await rec.wait { $0.last == "connected false" }
        db.goOnline()
        await rec.wait { $0.last == "connected true" }
    }

    @Test func serverTimestampAndIncrementResolveOnTheServer() async throws {
        let t = try await TestNamespace.make()
        let db = t.client()
        defer { db.shutdown() }
        let ref = db.reference(withPath: "meta")
        let before = Int64(Date().timeIntervalSince1970 * 1000)
        try await ref.setValue(["at": ServerValue.timestamp(), "n": ServerValue.increment(5)])
        try await ref.child("n").setValue(ServerValue.increment(2))
        let stored = try await t.server.restGet("meta", ns: t.ns)
        #expect(stored["n"] == .int(7))
        let at = try #require(stored["at"]?.numberValue)
        #expect(abs(Int64(at) - before) < 10_000)
    }

    @Test func onDisconnectRunsWhenTheClientGoesAway() async throws {
        let t = try await TestNamespace.make()
        let leaving = t.client(), watcher = t.client()
        defer { watcher.shutdown() }
        let status = leaving.reference(withPath: "presence/ann")
        try await status.setValue("online")
        try await status.onDisconnectSetValue("offline")
        try await leaving.reference(withPath: "presence/bob").onDisconnectUpdateChildValues(["state": "gone", "at": ServerValue.timestamp()])
        try await leaving.reference(withPath: "presence/tmp").setValue(1)
        try await leaving.reference(withPath: "presence/tmp").onDisconnectRemoveValue()
        try await leaving.reference(withPath: "presence/cancelled").onDisconnectSetValue(true)
        try await leaving.reference(withPath: "presence/cancelled").cancelDisconnectOperations()
        let rec = Recorder()
        watcher.reference(withPath: "presence").observe(.value) { s in rec.add(s.json) }
        await rec.wait { $0.last == #"{"ann":"online","tmp":1}"# }
        leaving.goOffline()
        let seen = await rec.wait { ($0.last ?? "").contains(#""ann":"offline""#) && ($0.last ?? "").contains("gone") && !($0.last ?? "").contains("tmp") }
        #expect(!(seen.last ?? "").contains("cancelled"))
        leaving.shutdown()
    }

    @Test func onDisconnectOperationsShowLocallyWhenTheConnectionDrops() async throws {
        let t = try await TestNamespace.make()
        let db = t.client()
        defer { db.shutdown() }
        let me = db.reference(withPath: "presence/me")
        try await me.setValue(["state": "online", "keep": 1])
        let rec = Recorder()
        me.observe(.value) { s in rec.add(s.json) }
        await rec.wait { $0 == [#"{"keep":1,"state":"online"}"#] }
        try await me.onDisconnectUpdateChildValues(["state": "offline", "gone": true])
        try await me.child("gone").cancelDisconnectOperations()
        db.goOffline()
        // Shown at once, without the server.
        await rec.wait { $0.last == #"{"keep":1,"state":"offline"}"# }
        db.goOnline()
        // The server runs them once it has seen the connection close: wait for that (bounded).
        let want = JSON.object(["keep": .int(1), "state": .string("offline")])
        var onServer = try await t.server.restGet("presence/me", ns: t.ns)
        let deadline = ContinuousClock.now + .seconds(10)
        while onServer != want && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
            onServer = try await t.server.restGet("presence/me", ns: t.ns)
        }
        #expect(onServer == want)
    }

    @Test func eventsAsAsyncSequence() async throws {
        let t = try await TestNamespace.make()
        let db = t.client(), writer = t.client()
        defer { db.shutdown(); writer.shutdown() }
        let stream = db.reference(withPath: "chat").events(.childAdded)
        let collect = Task { () throws -> [String] in
            var keys: [String] = []
            for try await event in stream {
                keys.append("\(event.snapshot.key):\(event.snapshot.value as? String ?? "")")
                if keys.count == 3 { break }
            }
            return keys
        }
        for (k, v) in [("m1", "hi"), ("m2", "there"), ("m3", "!")] {
            try await writer.reference(withPath: "chat/\(k)").setValue(v)
        }
        let keys = try await withTimeout { try await collect.value }
        #expect(keys == ["m1:hi", "m2:there", "m3:!"])
    }
}

@Suite(.timeLimit(.minutes(1))) struct LifecycleTests {
    @Test func adminTokenClientWorksAgainstEmberd() async throws {
        let t = try await TestNamespace.make()
        var config = DatabaseConfiguration.fastReconnect
        config.authToken = "owner"
        let db = Database(url: t.url, configuration: config)
        defer { db.shutdown() }
        try await db.reference(withPath: "admin/x").setValue(1)
        #expect(try await db.reference(withPath: "admin/x").getData().value as? Int == 1)
    }

    /// No retain cycle keeps a database (and its socket) alive after the app drops it.
    @Test func databaseIsReleasedWhenNoLongerReferenced() async throws {
        let t = try await TestNamespace.make()
        weak var weakDB: Database?
        weak var weakRepo: Repo?
        do {
            let db = t.client()
            weakDB = db
            weakRepo = db.repo
            let rec = Recorder()
            let ref = db.reference(withPath: "x")
            ref.observe(.value) { s in rec.add(s.json) }
            try await ref.setValue(1)
            await rec.wait { $0.contains("1") }
            _ = try await ref.runTransactionBlock { d in d.value = 2; return .success(withValue: d) }
        }
        #expect(try await eventually(timeout: .seconds(5)) { weakDB == nil && weakRepo == nil })
    }
}

@Suite(.timeLimit(.minutes(1))) struct ChildEventTests {
    @Test func childEventsOnAPlainLocationFromAnotherClient() async throws {
        let t = try await TestNamespace.make()
        let db = t.client(), writer = t.client()
        defer { db.shutdown(); writer.shutdown() }
        let rec = Recorder()
        let ref = db.reference(withPath: "items")
        ref.observe(.childAdded, andPreviousSiblingKeyWith: { s, prev in rec.add("added \(s.key) \(s.json) prev=\(prev ?? "nil")") })
        ref.observe(.childChanged) { s in rec.add("changed \(s.key) \(s.json)") }
        ref.observe(.childRemoved) { s in rec.add("removed \(s.key) \(s.json)") }
        ref.observe(.childMoved) { s in rec.add("moved \(s.key)") }
        // The listen is answered (a value event, of nothing yet) before the writes start: each
        // write then arrives as its own change, not folded into the listen's first data.
        let loaded = Recorder()
        let h = ref.observe(.value) { _ in loaded.add("loaded") }
        await loaded.wait { !$0.isEmpty }
        ref.removeObserver(withHandle: h)
        let w = writer.reference(withPath: "items")
        try await w.child("a").setValue(1)
        try await w.child("b").setValue(["x": 1])
        try await w.child("b/x").setValue(2)
        try await w.child("a").removeValue()
        // Priority order: giving "b" a priority moves it after "c".
        try await w.child("c").setValue(3)
        try await w.child("b").setPriority(10)
        // "moved b" and the "changed b" after it come from one push: wait for both.
        await rec.wait { $0.contains("moved b") && $0.last?.hasPrefix("changed b {\".priority\"") == true }
        #expect(rec.all == [
            "added a 1 prev=nil", #"added b {"x":1} prev=a"#, #"changed b {"x":2}"#, "removed a 1",
            "added c 3 prev=b", "moved b", #"changed b {".priority":10,"x":2}"#,
        ])
    }

    @Test func equalToWithChildKeyAndStartAfterOnKeys() async throws {
        let t = try await TestNamespace.make()
        try await t.server.restPut("people", ns: t.ns, json: #"{"ann":{"age":30},"bob":{"age":30},"cat":{"age":30},"dan":{"age":40}}"#)
        let db = t.client()
        defer { db.shutdown() }
        let people = db.reference(withPath: "people")
        let fromBob = try await people.queryOrdered(byChild: "age").queryStarting(atValue: 30, childKey: "bob").queryLimited(toFirst: 2).getData()
        #expect(fromBob.children.map(\.key) == ["bob", "cat"])
        let exactly = await people.queryOrdered(byChild: "age").queryEqual(toValue: 30, childKey: "cat").observeSingleEvent(of: .value)
        #expect(exactly.children.map(\.key) == ["cat"])
        let afterBob = await people.queryOrderedByKey().queryStarting(afterValue: "bob").observeSingleEvent(of: .value)
        #expect(afterBob.children.map(\.key) == ["cat", "dan"])
        let beforeCat = await people.queryOrderedByKey().queryEnding(beforeValue: "cat").observeSingleEvent(of: .value)
        #expect(beforeCat.children.map(\.key) == ["ann", "bob"])
    }
}

@Suite(.timeLimit(.minutes(1))) struct LargeMessageTests {
    /// Messages over 16384 characters travel as a count frame plus chunks, both ways.
    @Test func largePayloadsAreSplitAndReassembled() async throws {
        let t = try await TestNamespace.make()
        let db = t.client()
        defer { db.shutdown() }
        var obj: [String: String] = [:]
        for i in 0..<300 { obj["item\(i)"] = String(repeating: "é", count: 100) + "\(i)" }
        let body = JSON.object(KeyMap(obj.mapValues { JSON.string($0) })).serialized()
        try await t.server.restPut("big", ns: t.ns, json: body)
        let rec = Recorder()
        db.reference(withPath: "big").observe(.value) { s in rec.add("\(s.childrenCount)") }
        await rec.wait { $0 == ["300"] }
        let long = String(repeating: "ü", count: 40_000)
        try await db.reference(withPath: "long").setValue(long)
        #expect(try await t.server.restGet("long", ns: t.ns) == .string(long))
    }
}
