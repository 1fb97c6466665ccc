import EmberCore
import EmberProtocol
import Testing
@testable import EmberClient

@Suite struct WireAndBackoffTests {
    @Test func framingSplitsLongMessagesAndReassembles() throws {
        let long = String(repeating: "é", count: 40_000)
        // The client frames and reassembles with EmberProtocol's code, as the server does.
        let frames = WireFraming.split(long)
        #expect(frames.first == "3")
        #expect(frames.count == 4)
        var r = WireReassembler(maxMessageBytes: PersistentConnection.maxInboundMessageBytes)
        var out: [String] = []
        for f in frames { if case .message(let m) = try r.feed(f) { out.append(m) } }
        #expect(out == [long])
        #expect(WireFraming.split("{\"t\":\"d\"}") == ["{\"t\":\"d\"}"])
        var r2 = WireReassembler(maxMessageBytes: PersistentConnection.maxInboundMessageBytes)
        #expect(try r2.feed("0") == .none)  // keep-alive / empty count
        #expect(try r2.feed("{}") == .message("{}"))
        // A count announcing more than the bound is refused.
        var r3 = WireReassembler(maxMessageBytes: 1_000)
        var refused: WireReassembler.Failure?
        do { _ = try r3.feed("999") } catch { refused = error }
        #expect(refused == .tooLarge(limit: 1_000))
    }

    @Test func parsesServerMessages() {
        #expect(WireServerMessage.parse(#"{"t":"c","d":{"t":"h","d":{"ts":1700000000000,"v":"5","h":"x:1","s":"abc"}}}"#)
                == .hello(timestamp: 1_700_000_000_000, host: "x:1", sessionID: "abc", nodes: nil))
        // Ember's extension: the cluster's client URLs (non-strings are skipped); other unknown
        // fields are ignored, as Firebase SDKs do.
        #expect(WireServerMessage.parse(#"{"t":"c","d":{"t":"h","d":{"ts":1,"v":"5","h":"x:1","s":"abc","en":["http://a:1",7,"http://b:2"],"zz":{"future":1}}}}"#)
                == .hello(timestamp: 1, host: "x:1", sessionID: "abc", nodes: ["http://a:1", "http://b:2"]))
        #expect(WireServerMessage.parse(#"{"t":"d","d":{"r":7,"b":{"s":"datastale","d":"changed"}}}"#)
                == .response(r: 7, status: "datastale", data: .string("changed")))
        #expect(WireServerMessage.parse(#"{"t":"d","d":{"a":"m","b":{"p":"a/b","d":{"c":1},"t":3,"v":9}}}"#)
                == .dataPush(path: try! Path("a/b"), data: .object(["c": .int(1)]), isMerge: true, tag: 3, version: 9))
        #expect(WireServerMessage.parse(#"{"t":"d","d":{"a":"d","b":{"p":"","d":null}}}"#)
                == .dataPush(path: .root, data: .null, isMerge: false, tag: nil, version: nil))
        #expect(WireServerMessage.parse(#"{"t":"c","d":{"t":"s","d":"bye"}}"#) == .shutdown("bye"))
        #expect(WireServerMessage.parse("not json") == nil)
    }

    /// One definition for both ends: every message emberd sends parses back to itself, and so
    /// does every message the client sends, as the server parses it.
    @Test func sharedTypedMessagesRoundTrip() throws {
        let server: [WireServerMessage] = [
            .hello(timestamp: 5, host: "h:1", sessionID: "s", nodes: ["http://a:1"]),
            .pong, .shutdown("bye"), .protocolError("Invalid message"),
            .response(r: 3, status: "ok", data: .string("")),
            .dataPush(path: try Path("a/b"), data: .object(["c": .int(1)]), isMerge: true, tag: 7, version: 12),
            .dataPush(path: .root, data: .null, isMerge: false, tag: nil, version: nil),
            .listenRevoked(path: try Path("x"), query: .object(["l": .int(1)])),
            .authRevoked(status: "expired_token", reason: "Auth token is expired."),
        ]
        for m in server { #expect(WireServerMessage.parse(m.text) == m) }
        let client: [WireClientMessage] = [.ping, .request(r: 9, action: "m", body: ["p": .string("a"), "d": .object(["b": .int(1)])])]
        for m in client { #expect(try WireClientMessage.parse(m.text).get() == m) }
        #expect(WireClientMessage.parse("[1]") == .failure(.notProtocol))
        #expect(WireClientMessage.parse(#"{"t":"d","d":{"a":"p"}}"#) == .failure(.missingRequestFields))
        #expect(try WireClientMessage.parse(#"{"t":"c","d":{"t":"n"}}"#).get() == .ignored)
    }

    @Test func requestsAreEncodedWithRequestNumbers() throws {
        let text = ClientMessage.request(4, action: "p", body: ["p": .string("a"), "d": .int(1), "h": .string("")])
        let json = try JSON.parse(text)
        #expect(json["t"] == .string("d"))
        #expect(json["d"]?["r"] == .int(4))
        #expect(json["d"]?["a"] == .string("p"))
        #expect(json["d"]?["b"]?["h"] == .string(""))
    }

    @Test func backoffGrowsByMultiplierUpToMaximumAndResets() {
        let policy = ReconnectPolicy(initial: .seconds(1), maximum: .seconds(3), multiplier: 1.3,
                                     resetAfter: .seconds(30), random: { 1 })
        var b = ReconnectBackoff(policy: policy)
        let delays = (0..<7).map { _ in b.nextDelay(connectedFor: nil) }
        let ms = delays.map { Int(($0 / .milliseconds(1)).rounded()) }
        #expect(ms == [1000, 1300, 1690, 2197, 2856, 3000, 3000])
        // A connection that lasted long enough starts over.
        #expect(b.nextDelay(connectedFor: .seconds(31)) == .seconds(1))
        // A short-lived one keeps growing.
        #expect(Int((b.nextDelay(connectedFor: .seconds(1)) / .milliseconds(1)).rounded()) == 1300)
    }

    @Test func backoffDelayIsARandomFractionOfTheCurrentDelay() {
        let policy = ReconnectPolicy(initial: .seconds(2), maximum: .seconds(30), multiplier: 1.3, random: { 0.25 })
        var b = ReconnectBackoff(policy: policy)
        #expect(b.nextDelay(connectedFor: nil) == .milliseconds(500))
        #expect(b.nextDelay(connectedFor: nil) == .milliseconds(650))
    }

    @Test func websocketURLFromDatabaseURL() {
        #expect(Database.websocketURL(for: "http://127.0.0.1:9000?ns=demo") == "ws://127.0.0.1:9000/.ws?v=5&ns=demo")
        #expect(Database.websocketURL(for: "http://localhost:9000") == "ws://localhost:9000/.ws?v=5")
        #expect(Database.websocketURL(for: "https://example.com?ns=x") == "wss://example.com/.ws?v=5&ns=x")
        #expect(Database.websocketURL(for: "ftp://x") == nil)
        // Default ports are dropped, so a node named both ways is one node (`NodeList`).
        #expect(Database.websocketURL(for: "http://Example.com:80?ns=x") == "ws://Example.com/.ws?v=5&ns=x")
        #expect(Database.websocketURL(for: "https://h:443") == "wss://h/.ws?v=5")
        let db = offlineDatabase()
        defer { db.shutdown() }
        #expect(db.reference(withPath: "a/b").url == "http://127.0.0.1:1/a/b?ns=offline")
        #expect(db.reference().url == "http://127.0.0.1:1?ns=offline")
        #expect(db.reference(withPath: "a/b").parent?.key == "a")
        #expect(db.reference(withPath: "a/b").root.key == nil)
        #expect(db.reference(withPath: ".info/connected").key == "connected")
    }
}
