import EmberCore
import Foundation
import Testing
@testable import EmberClient

/// The Repo against a server scripted by the test (no sockets): rejections and protocol edges
/// emberd cannot produce on demand.
@Suite(.timeLimit(.minutes(1))) struct RepoScriptedServerTests {
    func database(_ transport: FakeTransport) -> Database {
        var config = DatabaseConfiguration(reconnectPolicy: ReconnectPolicy(initial: .milliseconds(10), random: { 0 }))
        config.transport = transport
        return Database(url: "http://127.0.0.1:1?ns=scripted", configuration: config)
    }

    /// Waits for the client's next request with `action` and returns (r, body).
    func request(_ s: FakeSocket, _ action: String, after count: Int = 0) async throws -> (Int64, JSON) {
        guard try await eventually(timeout: .seconds(5), { s.sent.filter { $0["d"]?["a"] == .string(action) }.count > count }) else {
            throw TestFailure("no \(action) request; sent \(s.sent)")
        }
        let m = s.sent.filter { $0["d"]?["a"] == .string(action) }[count]
        guard case .int(let r)? = m["d"]?["r"] else { throw TestFailure("no r") }
        return (r, m["d"]?["b"] ?? .null)
    }

    func push(_ s: FakeSocket, _ path: String, _ data: String) {
        s.onEvent(.message(#"{"t":"d","d":{"a":"d","b":{"p":"\#(path)","d":\#(data)}}}"#))
    }

    @Test func permissionDeniedWriteIsRolledBackWithEvents() async throws {
        let transport = FakeTransport()
        let db = database(transport)
        defer { db.shutdown() }
        let rec = Recorder()
        db.reference(withPath: "doc").observe(.value) { s in rec.add(s.json) }
        let s = try await transport.socket(0)
        s.hello()
        let (listenR, listenBody) = try await request(s, "q")
        #expect(listenBody["p"] == .string("doc"))
        #expect(listenBody["h"] == .string(""))
        push(s, "doc", #"{"a":1}"#)
        s.respond(listenR)
        await rec.wait { $0 == [#"{"a":1}"#] }
        let done = Recorder()
        db.reference(withPath: "doc/b").setValue(2) { error, _ in done.add((error as? DatabaseError)?.code.rawValue ?? "none") }
        await rec.wait { $0.last == #"{"a":1,"b":2}"# }
        let (putR, putBody) = try await request(s, "p")
        #expect(putBody["p"] == .string("doc/b"))
        s.respond(putR, "permission_denied")
        await rec.wait { $0 == [#"{"a":1}"#, #"{"a":1,"b":2}"#, #"{"a":1}"#] }
        await done.wait { $0 == ["permission_denied"] }
    }

    @Test func reconnectResendsListenWithHashOfCachedDataAndQueuedWrites() async throws {
        let transport = FakeTransport()
        let db = database(transport)
        defer { db.shutdown() }
        let rec = Recorder()
        db.reference(withPath: "doc").observe(.value) { s in rec.add(s.json) }
        let s1 = try await transport.socket(0)
        s1.hello()
        let (r1, _) = try await request(s1, "q")
        push(s1, "doc", #"{"a":1}"#)
        s1.respond(r1)
        await rec.wait { $0 == [#"{"a":1}"#] }
        s1.drop()
        withoutWaiting {
            db.reference(withPath: "doc/b").setValue(2)
            db.reference(withPath: "doc").updateChildValues(["c": 3])
        }
        await rec.wait { $0.last == #"{"a":1,"b":2,"c":3}"# }
        let s2 = try await transport.socket(1)
        s2.hello()
        let (_, body) = try await request(s2, "q")
        let expectedHash = try Node(json: JSON.parse(#"{"a":1}"#)).firebaseHash
        #expect(body["h"] == .string(expectedHash))
        let (_, put) = try await request(s2, "p")
        let (_, merge) = try await request(s2, "m")
        #expect(put["d"] == .int(2))
        #expect(merge["d"] == .object(["c": .int(3)]))
        #expect(s2.actions == ["q", "p", "m"])
    }

    @Test func taggedQueryDataIsRoutedByTag() async throws {
        let transport = FakeTransport()
        let db = database(transport)
        defer { db.shutdown() }
        let rec = Recorder()
        db.reference(withPath: "scores").queryOrderedByValue().queryLimited(toLast: 1)
            .observe(.childAdded) { s in rec.add("added \(s.key)") }
        let s = try await transport.socket(0)
        s.hello()
        let (r, body) = try await request(s, "q")
        guard case .int(let tag)? = body["t"] else { throw TestFailure("untagged: \(body)") }
        #expect(body["q"]?["l"] == .int(1))
        #expect(body["q"]?["vf"] == .string("r"))
        #expect(body["q"]?["i"] == .string(".value"))
        s.onEvent(.message(#"{"t":"d","d":{"a":"d","b":{"p":"scores","d":{"x":9},"t":\#(tag)}}}"#))
        s.respond(r)
        await rec.wait { $0 == ["added x"] }
        s.onEvent(.message(#"{"t":"d","d":{"a":"m","b":{"p":"scores","d":{"x":null,"y":10},"t":\#(tag)}}}"#))
        await rec.wait { $0 == ["added x", "added y"] }
    }

    @Test func rejectedListenCancelsItsObservers() async throws {
        let transport = FakeTransport()
        let db = database(transport)
        defer { db.shutdown() }
        let rec = Recorder()
        let ref = db.reference(withPath: "secret")
        ref.observe(.value, with: { s in rec.add("value \(s.json)") }, withCancel: { error in
            rec.add("cancel \((error as? DatabaseError)?.code.rawValue ?? "?")")
        })
        let stream = ref.events(.childAdded)
        let ended = Task { () -> String in
            do {
                for try await _ in stream {}
                return "finished"
            } catch { return "threw \((error as? DatabaseError)?.code.rawValue ?? "?")" }
        }
        let s = try await transport.socket(0)
        s.hello()
        let (r, _) = try await request(s, "q")
        s.respond(r, "permission_denied")
        await rec.wait { $0 == ["cancel permission_denied"] }
        #expect(try await withTimeout { await ended.value } == "threw permission_denied")
    }

    @Test func callbacksRunOnTheConfiguredQueue() async throws {
        let transport = FakeTransport()
        let key = DispatchSpecificKey<String>()
        let queue = DispatchQueue(label: "test.callbacks")
        queue.setSpecific(key: key, value: "mine")
        var config = DatabaseConfiguration(callbackQueue: queue)
        config.transport = transport
        let db = Database(url: "http://127.0.0.1:1?ns=q", configuration: config)
        defer { db.shutdown() }
        let rec = Recorder()
        db.reference(withPath: "x").observe(.value) { _ in rec.add(DispatchQueue.getSpecific(key: key) ?? "other") }
        withoutWaiting { db.reference(withPath: "x").setValue(1) }
        await rec.wait { $0 == ["mine"] }
    }

    @Test func aSetAbortsAnOverlappingTransaction() async throws {
        let transport = FakeTransport()
        let db = database(transport)
        defer { db.shutdown() }
        // The connection starts on first use, as in the SDK: start it now.
        _ = db.repo
        let s = try await transport.socket(0)
        s.hello()
        let ref = db.reference(withPath: "n")
        let done = Recorder()
        ref.runTransactionBlock({ data in
            data.value = 1
            return .success(withValue: data)
        }, andCompletionBlock: { error, committed, _ in
            done.add("\((error as? DatabaseError)?.code.rawValue ?? "none") \(committed)")
        })
        let (listenR, _) = try await request(s, "q")
        push(s, "n", "null")
        s.respond(listenR)
        let (txR, tx) = try await request(s, "p")
        #expect(tx["h"] == .string(""))
        #expect(tx["d"] == .int(1))
        withoutWaiting { ref.setValue(5) }
        _ = try await request(s, "p", after: 1)
        s.respond(txR)
        await done.wait { $0 == ["write_canceled false"] }
    }

    @Test func authIsSentFirstOnEveryConnect() async throws {
        let transport = FakeTransport()
        var config = DatabaseConfiguration(reconnectPolicy: ReconnectPolicy(initial: .milliseconds(10), random: { 0 }),
                                           authToken: "owner")
        config.transport = transport
        let db = Database(url: "http://127.0.0.1:1?ns=auth", configuration: config)
        defer { db.shutdown() }
        db.reference(withPath: "x").observe(.value) { _ in }
        let s1 = try await transport.socket(0)
        s1.hello()
        #expect(try await eventually { s1.actions == ["gauth", "q"] })
        #expect(s1.sent[0]["d"]?["b"]?["cred"] == .string("owner"))
        db.setAuthToken("a.b.c")
        #expect(try await eventually { s1.actions == ["gauth", "q", "auth"] })
        s1.drop()
        let s2 = try await transport.socket(1)
        s2.hello()
        #expect(try await eventually { s2.actions == ["auth", "q"] })
        db.setAuthToken(nil)
        #expect(try await eventually { s2.actions == ["auth", "q", "unauth"] })
    }
}
