import EmberCore
import Foundation
import Synchronization
import Testing
@testable import EmberClient

/// Sockets the test drives by hand.
final class FakeSocket: TransportConnection {
    let onEvent: @Sendable (TransportEvent) -> Void
    private let sentFrames = Mutex<[String]>([])
    private let closedFlag = Mutex(false)

    init(onEvent: @escaping @Sendable (TransportEvent) -> Void) { self.onEvent = onEvent }

    func send(_ text: String) { sentFrames.withLock { $0.append(text) } }
    func close() { closedFlag.withLock { $0 = true } }

    var sent: [JSON] { sentFrames.withLock { $0 }.compactMap { try? JSON.parse($0) } }
    var actions: [String] { sent.compactMap { $0["d"]?["a"]?.stringValue } }
    var isClosed: Bool { closedFlag.withLock { $0 } }

    func hello(ts: Int64 = 1_000, nodes: [String]? = nil) {
        let en = nodes.map { ",\"en\":" + JSON.array($0.map { .string($0) }).serialized() } ?? ""
        onEvent(.message(#"{"t":"c","d":{"t":"h","d":{"ts":\#(ts),"v":"5","h":"h","s":"s1"\#(en)}}}"#))
    }
    func respond(_ r: Int64, _ status: String = "ok") {
        onEvent(.message(#"{"t":"d","d":{"r":\#(r),"b":{"s":"\#(status)","d":""}}}"#))
    }
    func drop() { onEvent(.closed) }
}

final class FakeTransport: WireTransport {
    private let sockets = Mutex<[FakeSocket]>([])
    private let urls = Mutex<[String]>([])
    func open(url: String, onEvent: @escaping @Sendable (TransportEvent) -> Void) -> any TransportConnection {
        let s = FakeSocket(onEvent: onEvent)
        sockets.withLock { $0.append(s) }
        urls.withLock { $0.append(url) }
        return s
    }
    var openedURLs: [String] { urls.withLock { $0 } }
    var opened: [FakeSocket] { sockets.withLock { $0 } }

    func socket(_ i: Int) async throws -> FakeSocket {
        guard try await eventually({ self.opened.count > i }) else { throw TestFailure("socket \(i) never opened") }
        return opened[i]
    }
}

/// Handshake timers the test fires by hand, in the order the connection started them.
final class ManualTimers: Sendable {
    private let started = Mutex<[@Sendable () -> Void]>([])
    var start: PersistentConnection.HandshakeTimer {
        { _, fire in self.started.withLock { $0.append(fire) } }
    }
    /// Fires the i-th timer started, once the connection has started it.
    func fire(_ i: Int) async throws {
        guard try await eventually({ self.started.withLock { $0.count } > i }) else { throw TestFailure("timer \(i) never started") }
        started.withLock { $0[i] }()
    }
}

final class FakeDelegate: ConnectionDelegate {
    let log = Recorder()
    func connection(didReceive data: JSON, at path: Path, isMerge: Bool, tag: Int?) {
        log.add("data \(path) \(isMerge ? "m" : "d") \(data.serialized())")
    }
    func connection(didChangeStatus connected: Bool) { log.add("connected \(connected)") }
    func connection(didUpdateServerTimeOffset ms: Int64) { log.add("offset") }
}

extension PersistentConnection {
    /// Returns once everything submitted (and every transport event delivered) before this call
    /// was handled: the point after which a check that something did not happen means something.
    nonisolated func handled() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in submit(.barrier { c.resume() }) }
    }
}

@Suite struct PersistentConnectionTests {
    let fastPolicy = ReconnectPolicy(initial: .milliseconds(10), maximum: .milliseconds(20), random: { 0 })

    func completion(_ rec: Recorder, _ name: String) -> RequestCompletion {
        { status, _ in rec.add("\(name) \(status)") }
    }

    @Test func queuedWritesGoOutAfterListensInOrderOnceConnected() async throws {
        let transport = FakeTransport()
        let delegate = FakeDelegate()
        let conn = PersistentConnection(url: "ws://x", transport: transport, policy: fastPolicy, delegate: delegate)
        let done = Recorder()
        conn.submit(.write(action: "p", path: try Path("a"), data: .int(1), hash: nil, onComplete: completion(done, "w1")))
        conn.submit(.listen(.init(path: try Path("l"), queryWire: nil, tag: nil, hash: { "H1" }, onComplete: completion(done, "listen"))))
        conn.submit(.write(action: "m", path: try Path("b"), data: .object(["c": .int(2)]), hash: nil, onComplete: completion(done, "w2")))
        let s = try await transport.socket(0)
        await conn.handled()
        #expect(s.sent.isEmpty, "nothing is sent before the handshake")
        s.hello()
        #expect(try await eventually { s.actions.count == 3 })
        #expect(s.actions == ["q", "p", "m"])
        #expect(s.sent[0]["d"]?["b"]?["h"] == .string("H1"))
        #expect(s.sent[1]["d"]?["b"]?["p"] == .string("a"))
        #expect(s.sent[2]["d"]?["b"]?["p"] == .string("b"))
        s.respond(3)
        s.respond(2)
        s.respond(1)
        await done.wait { Set($0) == ["w2 ok", "w1 ok", "listen ok"] }
        await delegate.log.wait { $0.contains("connected true") }
        conn.submit(.shutdown)
    }

    @Test func failedOrDroppedConnectionsMoveToTheNextNode() async throws {
        let transport = FakeTransport()
        let conn = PersistentConnection(urls: ["ws://a", "ws://b", "ws://c"], transport: transport, policy: fastPolicy, delegate: nil)
        let done = Recorder()
        let s0 = try await transport.socket(0)
        s0.drop()  // a dead node: the attempt fails before the handshake
        let s1 = try await transport.socket(1)
        s1.hello()
        conn.submit(.write(action: "p", path: try Path("a"), data: .int(1), hash: nil, onComplete: completion(done, "w")))
        #expect(try await eventually { s1.actions == ["p"] })
        s1.drop()  // the connected node dies with the write unacknowledged
        let s2 = try await transport.socket(2)
        s2.hello()
        #expect(try await eventually { s2.actions == ["p"] })
        s2.respond(2)
        await done.wait { $0 == ["w ok"] }
        s2.drop()
        _ = try await transport.socket(3)
        #expect(transport.openedURLs == ["ws://a", "ws://b", "ws://c", "ws://a"])
        conn.submit(.shutdown)
    }

    /// A client given one node connects to the nodes its handshake named when that node dies,
    /// with the given URL's path and query; a later handshake's list replaces the learned one.
    @Test func handshakeNodesAreTriedWhenTheGivenNodeDies() async throws {
        let transport = FakeTransport()
        let conn = PersistentConnection(urls: ["ws://a:1/.ws?v=5&ns=x"], transport: transport, policy: fastPolicy, delegate: nil)
        let s0 = try await transport.socket(0)
        s0.hello(nodes: ["http://a:1", "http://b:2", "https://c:3"])
        #expect(try await eventually { await conn.isConnected })
        #expect(await conn.urls == ["ws://a:1/.ws?v=5&ns=x", "ws://b:2/.ws?v=5&ns=x", "wss://c:3/.ws?v=5&ns=x"])
        s0.drop()
        let s1 = try await transport.socket(1)
        s1.hello(nodes: ["http://b:2", "http://d:4"])  // c left the cluster, d joined
        #expect(try await eventually { await conn.urls.last == "ws://d:4/.ws?v=5&ns=x" })
        #expect(await conn.urls == ["ws://a:1/.ws?v=5&ns=x", "ws://b:2/.ws?v=5&ns=x", "ws://d:4/.ws?v=5&ns=x"])
        s1.drop()
        _ = try await transport.socket(2)
        #expect(transport.openedURLs == ["ws://a:1/.ws?v=5&ns=x", "ws://b:2/.ws?v=5&ns=x", "ws://d:4/.ws?v=5&ns=x"])
        conn.submit(.shutdown)
    }

    /// Spreading: the first hello names the cluster; the client leaves that socket before sending
    /// anything (the app never sees it connected) for the node its seed picks, at once, and
    /// stays there when that node's hello names the same nodes. The seed is one the pure
    /// `NodeList` says moves (`NodeListSpreadTests` checks the choices themselves).
    @Test func aSpreadingClientMovesOnceToTheNodeItsSeedPicks() async throws {
        let given = "ws://a:1/.ws?v=5&ns=x"
        let named = ["http://a:1", "http://b:2", "http://c:3"]
        let moving = (UInt64(0)..<100).first { seed in
            var l = NodeList(given: [given], seed: seed)
            return l.handshake(named: named) != nil
        }
        let seed = try #require(moving)
        var replay = NodeList(given: [given], seed: seed)
        let move = replay.handshake(named: named)
        let target = try #require(move)
        let transport = FakeTransport()
        let delegate = FakeDelegate()
        // A reconnect after a failure would ask for a delay: the move asks for none.
        let delaysAsked = Recorder()
        var policy = fastPolicy
        policy.random = { delaysAsked.add("delay"); return 0 }
        let conn = PersistentConnection(urls: [given], transport: transport, policy: policy, delegate: delegate, spreadSeed: seed)
        let done = Recorder()
        conn.submit(.write(action: "p", path: try Path("a"), data: .int(1), hash: nil, onComplete: completion(done, "w")))
        let s0 = try await transport.socket(0)
        s0.hello(nodes: named)
        let s1 = try await transport.socket(1)
        #expect(s0.isClosed)
        #expect(s0.sent.isEmpty, "nothing is sent to the node left")
        #expect(transport.openedURLs == [given, target])
        s1.hello(nodes: named.reversed())
        #expect(try await eventually { s1.actions == ["p"] })
        s1.respond(1)
        await done.wait { $0 == ["w ok"] }
        await conn.handled()
        #expect(await conn.url == target)
        #expect(transport.opened.count == 2, "the second hello does not move it again")
        #expect(delegate.log.all.filter { $0.hasPrefix("connected") } == ["connected true"])
        #expect(delaysAsked.all.isEmpty)
        // Its node dies: the next node of its own order, not the given one's neighbour by rule.
        s1.drop()
        _ = try await transport.socket(2)
        replay.advance()
        #expect(transport.openedURLs.last == replay.current)
        conn.submit(.shutdown)
    }

    /// A node that accepts the connection but never says hello does not hold the client: after
    /// the handshake timeout the attempt counts as failed and the next node is tried.
    @Test func aSilentNodeIsLeftAfterTheHandshakeTimeout() async throws {
        let transport = FakeTransport()
        let timers = ManualTimers()
        let conn = PersistentConnection(urls: ["ws://a", "ws://b"], transport: transport, policy: fastPolicy, delegate: nil,
                                        handshakeTimer: timers.start)
        let s0 = try await transport.socket(0)
        // The first node never says hello: its handshake timer fires.
        try await timers.fire(0)
        let s1 = try await transport.socket(1)
        #expect(s0.isClosed)
        s1.hello()
        #expect(try await eventually { await conn.isConnected })
        // The second socket's timer fires after its hello: a connected socket is not timed out.
        try await timers.fire(1)
        #expect(try await eventually { await conn.handshakeTimeoutsSeen == 2 })
        #expect(await conn.isConnected, "a connected socket is not timed out")
        #expect(!s1.isClosed)
        #expect(transport.openedURLs == ["ws://a", "ws://b"])
        conn.submit(.shutdown)
    }

    @Test func reconnectRestoresListensWithFreshHashesAndResendsUnackedWrites() async throws {
        let transport = FakeTransport()
        let delegate = FakeDelegate()
        let conn = PersistentConnection(url: "ws://x", transport: transport, policy: fastPolicy, delegate: delegate)
        let hash = Mutex("first")
        let done = Recorder()
        conn.submit(.listen(.init(path: try Path("l"), queryWire: .object(["l": .int(2), "vf": .string("r")]), tag: 7,
                                  hash: { hash.withLock { $0 } }, onComplete: completion(done, "listen"))))
        let s1 = try await transport.socket(0)
        s1.hello()
        #expect(try await eventually { s1.actions == ["q"] })
        #expect(s1.sent[0]["d"]?["b"]?["t"] == .int(7))
        s1.respond(1)
        conn.submit(.write(action: "p", path: try Path("a"), data: .int(1), hash: nil, onComplete: completion(done, "plain")))
        conn.submit(.write(action: "p", path: try Path("t"), data: .int(5), hash: "abc", onComplete: completion(done, "cas")))
        #expect(try await eventually { s1.actions == ["q", "p", "p"] })
        hash.withLock { $0 = "second" }
        s1.drop()
        // The compare-and-set may or may not have landed: it fails instead of being resent.
        await done.wait { $0.contains("cas disconnect") }
        await delegate.log.wait { $0.contains("connected false") }
        let s2 = try await transport.socket(1)
        s2.hello()
        #expect(try await eventually { s2.actions == ["q", "p"] })
        #expect(s2.sent[0]["d"]?["b"]?["h"] == .string("second"))
        #expect(s2.sent[0]["d"]?["b"]?["q"]?["l"] == .int(2))
        #expect(s2.sent[1]["d"]?["b"]?["p"] == .string("a"))
        // Request numbers keep increasing across connections.
        #expect(s2.sent[1]["d"]?["r"] == .int(5))
        s2.respond(5)
        await done.wait { $0.contains("plain ok") }
        conn.submit(.shutdown)
    }

    @Test func goOfflineStopsReconnectingUntilGoOnline() async throws {
        let transport = FakeTransport()
        // Every reconnect asks the policy for its delay: none asked, none scheduled.
        let delaysAsked = Recorder()
        var policy = fastPolicy
        policy.random = { delaysAsked.add("delay"); return 0 }
        let conn = PersistentConnection(url: "ws://x", transport: transport, policy: policy, delegate: nil)
        let s1 = try await transport.socket(0)
        s1.hello()
        conn.submit(.goOffline)
        await conn.handled()
        #expect(s1.isClosed)
        #expect(delaysAsked.all.isEmpty, "no reconnect is scheduled while offline")
        #expect(transport.opened.count == 1)
        let done = Recorder()
        conn.submit(.write(action: "p", path: try Path("a"), data: .int(1), hash: nil, onComplete: completion(done, "w")))
        conn.submit(.goOnline)
        let s2 = try await transport.socket(1)
        s2.hello()
        #expect(try await eventually { s2.actions == ["p"] })
        conn.submit(.shutdown)
    }

    @Test func getFailsOfflineAfterTimeoutAndListenRejectionReportsStatus() async throws {
        let transport = FakeTransport()
        // A short wait for a connection: the test waits for the `offline` completion itself (the
        // deadline only bounds a failure). With the 3 s default and a 6 s deadline it failed when
        // parallel tests held the cooperative threads past the deadline.
        let conn = PersistentConnection(url: "ws://x", transport: transport, policy: fastPolicy, delegate: nil,
                                        getConnectTimeout: .milliseconds(50))
        let done = Recorder()
        conn.submit(.get(path: .root, queryWire: nil, onComplete: completion(done, "get")))
        let s = try await transport.socket(0)
        await done.wait { $0 == ["get offline"] }
        #expect(s.sent.isEmpty, "the get was never sent: no handshake yet")
        s.hello()
        conn.submit(.listen(.init(path: try Path("secret"), queryWire: nil, tag: nil, hash: { "" }, onComplete: completion(done, "listen"))))
        #expect(try await eventually { s.actions == ["q"] })
        s.respond(1, "permission_denied")
        await done.wait { $0.contains("listen permission_denied") }
        conn.submit(.shutdown)
    }
}
