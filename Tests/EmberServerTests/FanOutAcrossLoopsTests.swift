import EmberCore
import EmberProtocol
import Foundation
import NIOCore
import NIOPosix
import NIOWebSocket
import Synchronization
import Testing

@testable import EmberCluster
@testable import EmberNodeStore
@testable import EmberServer

/// The publish queues every connection's frames itself and hands the socket writes to the event
/// loops in groups (`FlushBatch`), untagged listens writing one shared encoded buffer. Over real
/// TCP sockets spread over two event loops, each connection must still receive exactly the
/// frames it would have received alone, in order, interleaved in order with its own responses.
@Suite struct FanOutAcrossLoopsTests {
    func p(_ s: String) -> Path { try! Path(s) }
    func n(_ s: String) -> Node { try! Node(json: JSON.parse(s)) }

    /// Collects what a client socket receives.
    final class Received: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let bytes = Mutex<[UInt8]>([])
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let b = unwrapInboundIn(data)
            bytes.withLock { $0 += b.readableBytesView }
        }
    }

    /// Server frames (unmasked, RFC 6455) as text; nil until `bytes` ends on a whole frame.
    static func texts(_ bytes: [UInt8]) -> [String]? {
        var out: [String] = []
        var i = 0
        while i < bytes.count {
            guard i + 2 <= bytes.count else { return nil }
            precondition(bytes[i] == 0x81, "a final text frame")
            var len = Int(bytes[i + 1] & 0x7F)
            var at = i + 2
            if len == 126 {
                guard at + 2 <= bytes.count else { return nil }
                len = Int(bytes[at]) << 8 | Int(bytes[at + 1])
                at += 2
            } else if len == 127 {
                guard at + 8 <= bytes.count else { return nil }
                len = bytes[at..<at + 8].reduce(0) { $0 << 8 | Int($1) }
                at += 8
            }
            guard at + len <= bytes.count else { return nil }
            out.append(String(decoding: bytes[at..<at + len], as: UTF8.self))
            i = at + len
        }
        return out
    }

    @Test func eachConnectionGetsExactlyItsEventsInOrderAcrossTwoEventLoops() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        // The clients get their own loop: sharing the server's group, their connects would take
        // turns with the server's accepts in its round-robin, and all accepted channels could
        // land on one loop.
        let clientGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            try await fanOut(on: group, clients: clientGroup)
        } catch {
            try? await group.shutdownGracefully()
            try? await clientGroup.shutdownGracefully()
            throw error
        }
        try await group.shutdownGracefully()
        try await clientGroup.shutdownGracefully()
    }

    func fanOut(on group: MultiThreadedEventLoopGroup, clients clientGroup: MultiThreadedEventLoopGroup) async throws {
        let accepted = Mutex<[any Channel]>([])
        let server = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(WebSocketFrameEncoder())
                    accepted.withLock { $0.append(channel) }
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let port = server.localAddress!.port!

        // 24 connections: listens at the root, on a deep path, on a sibling, and a tagged window.
        let window: JSON = .object(["i": .string(".value"), "l": .int(2), "vf": .string("r")])
        let initial = n(#"{"a":{"b":{"c":1},"s":{"x":1,"y":5,"z":9}},"other":3}"#)
        let kinds: [(path: String, queryWire: JSON?, tag: Int64?)] = [
            ("", nil, nil), ("a/b/c", nil, nil), ("other", nil, nil), ("a/s", window, 4),
        ]
        let count = 24
        var clients: [(channel: any Channel, received: Received)] = []
        for _ in 0..<count {
            let received = Received()
            let c = try await ClientBootstrap(group: clientGroup)
                .channelInitializer { ch in ch.eventLoop.makeCompletedFuture { try ch.pipeline.syncOperations.addHandler(received) } }
                .connect(host: "127.0.0.1", port: port).get()
            clients.append((c, received))
        }
        var acceptedChannels: [any Channel] = []
        let deadline = ContinuousClock.now + .seconds(10)
        while acceptedChannels.count < count, ContinuousClock.now < deadline {
            acceptedChannels = accepted.withLock { $0 }
            try await Task.sleep(for: .milliseconds(5))
        }
        try #require(acceptedChannels.count == count)
        // The server side of client i: the accepted channel whose peer port is the client's port.
        let byPeerPort = Dictionary(uniqueKeysWithValues: acceptedChannels.map { ($0.remoteAddress!.port!, $0) })
        let serverChannels = clients.map { byPeerPort[$0.channel.localAddress!.port!]! }
        // The connections are spread over both loops (the server's group hands accepts out in turn).
        #expect(Set(serverChannels.map { ObjectIdentifier($0.eventLoop) }).count == 2)

        let hub = RealtimeHub()
        var sessions: [RealtimeSession] = []
        var reference: [WireListen] = []
        var expected: [[String]] = []
        for (i, channel) in serverChannels.enumerated() {
            let k = kinds[i % kinds.count]
            let s = try #require(hub.open(id: "s\(i)", namespace: "ns"))
            s.attach(channel: channel) {}
            let query = try k.queryWire.map { try QuerySpec(wire: $0) } ?? .default
            let read = ReadResult(node: initial.child(at: p(k.path)), version: 1, appliedIndex: 1)
            #expect(started(s.beginListen(r: 1, listen(p(k.path), query, k.queryWire, k.tag))))
            let ok = WireMessages.response(1, status: "ok", data: .object([:]))
            s.listenRead(r: 1, listen(p(k.path), .default, k.queryWire, k.tag), indexed: true, read: read)
            var r = WireListen(path: p(k.path), query: query, queryWire: k.queryWire, tag: k.tag)
            expected.append(r.activate(with: read).flatMap { WireFraming.split($0.serialized()) } + WireFraming.split(ok.serialized()))
            reference.append(r)
            sessions.append(s)
        }

        // A large value (several frames per event) and small ones; a response to every other
        // connection between two changes must land between their frames.
        let big = String(repeating: "v", count: 40_000)
        let changes: [CommittedChange] = [
            CommittedChange(index: 2, namespace: "ns", path: p("a/b/c"), kind: .set(n("2"))),
            CommittedChange(index: 3, namespace: "ns", path: p("other"), kind: .set(try Node(json: .string(big)))),
            CommittedChange(index: 4, namespace: "ns", path: p("a/s"), kind: .merge([(p("y"), n("0")), (p("w"), n("20"))])),
            CommittedChange(index: 5, namespace: "ns", path: .root, kind: .merge([(p("a/b"), n(#"{"c":3,"d":4}"#)), (p("other"), n("null"))])),
            CommittedChange(index: 6, namespace: "ns", path: p("a/b/c/deeper"), kind: .set(n("true"))),
        ]
        for (round, change) in changes.enumerated() {
            hub.publish(change)
            for i in reference.indices {
                expected[i] += reference[i].apply(change).flatMap { WireFraming.split($0.serialized()) }
            }
            if round == 1 {
                for (i, s) in sessions.enumerated() where i % 2 == 0 {
                    let response = WireMessages.response(Int64(100 + i), status: "ok", data: .object([:]))
                    s.send(response)
                    expected[i] += WireFraming.split(response.serialized())
                }
            }
        }

        let expectedBytes = expected.map { frames in frames.reduce(0) { $0 + WireOutbound.frameSize(payload: $1.utf8.count) } }
        let until = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < until {
            let done = clients.indices.allSatisfy { clients[$0].received.bytes.withLock { $0.count } >= expectedBytes[$0] }
            if done { break }
            try await Task.sleep(for: .milliseconds(5))
        }
        for i in clients.indices {
            let got = Self.texts(clients[i].received.bytes.withLock { $0 })
            #expect(got == expected[i], "connection \(i) (\(kinds[i % kinds.count].path))")
        }
        // Same location, same bytes: the deep listeners (odd, so without responses) on both
        // loops got identical streams.
        let deep = clients.indices.filter { $0 % kinds.count == 1 }.map { clients[$0].received.bytes.withLock { $0 } }
        #expect(deep.count == count / kinds.count && Set(deep).count == 1)
        for c in clients { try? await c.channel.close() }
        try? await server.close()
    }
}
