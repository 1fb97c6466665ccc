import EmberCore
import Foundation
import Testing
@testable import EmberClient

/// A transport that never connects: for tests that need a `Database` but no server.
struct NoTransport: WireTransport {
    struct Dead: TransportConnection {
        func send(_ text: String) {}
        func close() {}
    }
    func open(url: String, onEvent: @escaping @Sendable (TransportEvent) -> Void) -> any TransportConnection { Dead() }
}

func offlineDatabase() -> Database {
    var config = DatabaseConfiguration()
    config.transport = NoTransport()
    return Database(url: "http://127.0.0.1:1?ns=offline", configuration: config)
}

@Suite struct ValueAndQueryBuilderTests {
    @Test func convertsSwiftValuesToJSON() throws {
        #expect(try ValueConverter.json(from: true) == .bool(true))
        #expect(try ValueConverter.json(from: 3) == .int(3))
        #expect(try ValueConverter.json(from: 2.5) == .double(2.5))
        #expect(try ValueConverter.json(from: "x") == .string("x"))
        #expect(try ValueConverter.json(from: nil) == .null)
        #expect(try ValueConverter.json(from: NSNull()) == .null)
        #expect(try ValueConverter.json(from: NSNumber(value: 7)) == .int(7))
        #expect(try ValueConverter.json(from: NSNumber(value: 1.5)) == .double(1.5))
        #expect(try ValueConverter.json(from: NSNumber(value: 1)) == .int(1))
        #expect(try ValueConverter.json(from: NSNumber(value: 0)) == .int(0))
        #expect(try ValueConverter.json(from: NSNumber(value: true)) == .bool(true))
        #expect(try ValueConverter.json(from: 1 as AnyObject) == .int(1))
        #expect(try ValueConverter.json(from: false as AnyObject) == .bool(false))
        #expect(try ValueConverter.json(from: [1, 0] as [Any]) == .array([.int(1), .int(0)]))
        #expect(try ValueConverter.json(from: ["a": 1, "b": [true, "s"]] as [String: Any])
                == .object(["a": .int(1), "b": .array([.bool(true), .string("s")])]))
        #expect(try ValueConverter.json(from: ServerValue.increment(2)) == .object([".sv": .object(["increment": .int(2)])]))
        #expect(throws: DatabaseError.self) { try ValueConverter.json(from: Double.nan) }
        #expect(throws: DatabaseError.self) { try ValueConverter.json(from: Date()) }
    }

    @Test func snapshotValuesLookLikeTheSDKs() throws {
        let db = offlineDatabase()
        defer { db.shutdown() }
        let node = try Node(json: JSON.parse(#"{"n":4,"d":2.5,"s":"x","b":true,"arr":{"0":"a","1":"b"},"o":{"k":1}}"#))
        let snap = DataSnapshot(node: node, ref: db.reference(), index: .priority)
        let v = try #require(snap.value as? [String: Any])
        #expect(v["n"] as? Int == 4)
        #expect(v["n"] as? Double == 4)
        #expect(v["d"] as? Double == 2.5)
        #expect(v["s"] as? String == "x")
        #expect(v["b"] as? Bool == true)
        #expect((v["arr"] as? [Any])?.count == 2)
        #expect(snap.childrenCount == 6)
        #expect(snap.hasChild("o/k"))
        #expect(!snap.hasChild("o/z"))
        #expect(snap.childSnapshot(forPath: "o/k").value as? Int == 1)
        #expect(snap.childSnapshot(forPath: "o/k").key == "k")
        #expect(DataSnapshot(node: .empty, ref: db.reference(), index: .priority).value == nil)
        let prio = try Node(json: JSON.parse(#"{".value":1,".priority":"p"}"#))
        let ps = DataSnapshot(node: prio, ref: db.reference(), index: .priority)
        #expect(ps.priority as? String == "p")
        #expect((ps.valueInExportFormat as? [String: Any])?[".priority"] as? String == "p")
    }

    @Test func queryBuilderMisuseIsRejected() throws {
        let db = offlineDatabase()
        defer { db.shutdown() }
        let ref = db.reference(withPath: "dinosaurs")
        let byHeight = ref.queryOrdered(byChild: "height")
        #expect(throws: QueryMisuseError.self) { try byHeight.throwingOrdered(by: .key) }
        #expect(throws: QueryMisuseError.self) { try byHeight.throwingOrdered(byChild: "weight") }
        #expect(throws: QueryMisuseError.self) { try ref.throwingOrdered(byChild: "$key") }
        let limited = ref.queryLimited(toFirst: 2)
        #expect(throws: QueryMisuseError.self) { try limited.throwingLimited(3, fromStart: false) }
        #expect(throws: QueryMisuseError.self) { try ref.throwingLimited(0, fromStart: true) }
        let started = byHeight.queryStarting(atValue: 3)
        #expect(throws: QueryMisuseError.self) { try started.throwingStarting(4, childKey: nil, after: false) }
        #expect(throws: QueryMisuseError.self) { try started.throwingEqual(4, childKey: nil) }
        let equal = byHeight.queryEqual(toValue: 25)
        #expect(throws: QueryMisuseError.self) { try equal.throwingEnding(30, childKey: nil, before: false) }
        let byKey = ref.queryOrderedByKey()
        #expect(throws: QueryMisuseError.self) { try byKey.throwingStarting(3, childKey: nil, after: false) }
        #expect(throws: QueryMisuseError.self) { try byKey.throwingStarting("a", childKey: "b", after: false) }
        #expect(throws: QueryMisuseError.self) { try ref.queryStarting(atValue: 1).throwingOrdered(by: .key) }
        #expect(throws: QueryMisuseError.self) { try ref.queryOrderedByPriority().throwingStarting(true, childKey: nil, after: false) }
        #expect(throws: QueryMisuseError.self) { try byHeight.throwingStarting(["a": 1], childKey: nil, after: false) }
        // Valid combinations build the SDK's wire query.
        let q = ref.queryOrderedByKey().queryStarting(atValue: "b").queryEnding(atValue: "b\u{f8ff}")
        #expect(q.spec.wireObject == .object(["sp": .string("b"), "sin": .bool(true), "ep": .string("b\u{f8ff}"),
                                                "ein": .bool(true), "i": .string(".key")]))
        let after = byHeight.queryStarting(afterValue: 3)
        #expect(after.spec.start?.name == KeyOrder.maxName)
        #expect(after.spec.start?.inclusive == false)
    }

    @Test func updateChildValuesRejectsOverlappingPaths() {
        #expect(throws: DatabaseError.self) {
            try DatabaseReference.parseUpdate(["a": 1, "a/b": 2], at: .root)
        }
        #expect(throws: DatabaseError.self) { try DatabaseReference.parseUpdate(["a.b": 1], at: .root) }
        #expect((try? DatabaseReference.parseUpdate(["/a/b": 1, "a/c": 2], at: .root))?.count == 2)
    }

    @Test func localWritesFireEventsImmediatelyWhileOffline() async throws {
        let db = offlineDatabase()
        defer { db.shutdown() }
        let rec = Recorder()
        let ref = db.reference(withPath: "list")
        ref.observe(.childAdded, andPreviousSiblingKeyWith: { s, prev in rec.add("added \(s.key) prev=\(prev ?? "nil")") })
        ref.observe(.value, with: { s in rec.add("value \(s.json)") })
        withoutWaiting {
            ref.setValue(["b": 2])
            ref.child("a").setValue(1)
        }
        await rec.wait { $0.contains("value {\"a\":1,\"b\":2}") }
        #expect(rec.all == ["added b prev=nil", "value {\"b\":2}", "added a prev=nil", "value {\"a\":1,\"b\":2}"])
        // Push ids increase.
        let k1 = ref.childByAutoId().key!, k2 = ref.childByAutoId().key!
        #expect(k1 < k2 && k1.count == 20)
    }

    @Test func transactionAbortReportsNotCommitted() async throws {
        let db = offlineDatabase()
        defer { db.shutdown() }
        let ref = db.reference(withPath: "counter")
        let result = try await ref.runTransactionBlock { _ in TransactionResult.abort() }
        #expect(result.committed == false)
    }
}

/// The seeds' Swift snippets, nearly verbatim (AnyObject casts included).
@Suite struct SeedSnippetTests {
    @Test func starTransactionBlockWithAnyObjectCasts() throws {
        let node = try Node(json: JSON.parse(#"{"title":"t","starCount":2,"stars":{"a":true,"b":true}}"#))
        let currentData = MutableData(node: node, now: 0)
        let uid = "c"
        if var post = currentData.value as? [String: AnyObject] {
            var stars: [String: Bool]
            stars = post["stars"] as? [String: Bool] ?? [:]
            var starCount = post["starCount"] as? Int ?? 0
            if let _ = stars[uid] {
                starCount -= 1
                stars.removeValue(forKey: uid)
            } else {
                starCount += 1
                stars[uid] = true
            }
            post["starCount"] = starCount as AnyObject?
            post["stars"] = stars as AnyObject?
            currentData.value = post
        }
        #expect(currentData.root.exportJSON().serialized() == #"{"starCount":3,"stars":{"a":true,"b":true,"c":true},"title":"t"}"#)
        let postDict = DataSnapshot(node: node, ref: offlineDatabase().reference(), index: .priority).value as? [String: AnyObject] ?? [:]
        #expect(postDict["starCount"] as? Int == 2)
        #expect(try ValueConverter.json(from: true as AnyObject) == .bool(true))
        #expect(try ValueConverter.json(from: 2.5 as AnyObject) == .double(2.5))
        #expect(try ValueConverter.json(from: 7 as AnyObject) == .int(7))
    }
}

extension SeedSnippetTests {
    /// The read/write seed's calls compile and run as written (trailing closures, literal types).
    @Test func readWriteSeedCallsCompileAsWritten() async throws {
        let db = offlineDatabase()
        defer { db.shutdown() }
        let ref: DatabaseReference = db.reference()
        let user = (uid: "u1", name: "ann")
        let rec = Recorder()
        func run() {
            ref.child("users").child(user.uid).setValue(["username": user.name])
            ref.child("users/\(user.uid)/username").setValue(user.name)
            let refHandle = ref.child("posts/p1").observe(DataEventType.value, with: { (snapshot) in
                let postDict = snapshot.value as? [String: AnyObject] ?? [:]
                rec.add("post \(postDict.count)")
            })
            ref.child("users").child(user.uid).observeSingleEvent(of: .value, with: { (snapshot) in
                let value = snapshot.value as? NSDictionary
                let username = value?["username"] as? String ?? ""
                rec.add("user \(username)")
            }) { (error) in
                print(error.localizedDescription)
            }
            guard let key = ref.child("posts").childByAutoId().key else { return }
            let post = ["uid": user.uid, "author": user.name, "title": "t", "body": "b"]
            let childUpdates = ["/posts/\(key)": post, "/user-posts/\(user.uid)/\(key)/": post]
            ref.updateChildValues(childUpdates)
            ref.child("users").child(user.uid).setValue(["username": user.name]) { (error: Error?, ref: DatabaseReference) in
                if let error = error { print("Data could not be saved: \(error).") }
            }
            let updates = ["posts/p1/stars/u1": true, "posts/p1/starCount": ServerValue.increment(1)] as [String: Any]
            Database.database(url: db.url).reference().updateChildValues(updates)
            ref.child("posts/p1").removeObserver(withHandle: refHandle)
        }
        run()
        await rec.wait { $0.contains("user ann") }
        Database.database(url: db.url).shutdown()
    }
}

extension ValueAndQueryBuilderTests {
    @Test func invalidWritesFailWithInvalidDataAndChangeNothing() async throws {
        let db = offlineDatabase()
        defer { db.shutdown() }
        let ref = db.reference(withPath: "x")
        await #expect(throws: DatabaseError.self) { try await ref.setValue(["bad.key": 1]) }
        await #expect(throws: DatabaseError.self) { try await ref.setValue(Double.infinity) }
        await #expect(throws: DatabaseError.self) { try await ref.updateChildValues(["a": 1, "a/b": 2]) }
        await #expect(throws: DatabaseError.self) { try await ref.setValue(["k": ["x": 1]], andPriority: true) }
        do {
            try await ref.setValue(["s": String(repeating: "x", count: 11 * 1024 * 1024)])
            Issue.record("a string over 10 MB must fail")
        } catch let e as DatabaseError {
            #expect(e.code == .invalidData)
        }
        let rec = Recorder()
        ref.observe(.childAdded) { s in rec.add(s.key) }
        await db.eventsDelivered()
        #expect(rec.all.isEmpty)
    }
}

extension ValueAndQueryBuilderTests {
    /// Awaiting a write that is never acknowledged (no server) ends with CancellationError when
    /// the task is cancelled; the write stays queued.
    @Test func cancellingAnAwaitedWriteStopsTheWait() async throws {
        let db = offlineDatabase()
        defer { db.shutdown() }
        let ref = db.reference(withPath: "pending")
        let local = Recorder()
        ref.observe(.value) { s in local.add("\(s.value as? Int ?? -1)") }
        let task = Task { try await ref.setValue(1) }
        // Applied locally: the write was made and the task waits for its acknowledgement.
        await local.wait { $0.contains("1") }
        task.cancel()
        let result = await task.result
        #expect(throws: CancellationError.self) { try result.get() }
        let get = Task { try await db.reference(withPath: "other").getData() }
        get.cancel()
        await #expect(throws: CancellationError.self) { try await get.value }
    }
}
