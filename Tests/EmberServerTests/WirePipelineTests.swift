import EmberCore
import EmberStorage
import Foundation
import Logging
import Testing

@testable import EmberCluster
@testable import EmberNodeStore
@testable import EmberServer

/// Pipelined wire writes on a real node (EmberNode over a real LMDB store): a connection's `p`/`m`
/// requests are queued without waiting, answered in request order once durable, and other
/// requests wait for the writes before them. (The same over a real socket:
/// Tests/integration/test_wire_protocol.py `test_pipelined_writes_are_acknowledged_in_order`.)
@Suite struct WirePipelineTests {
    func connect(_ node: EmberNode, _ configure: (inout RealtimeSession.Limits) -> Void = { _ in }) -> (RealtimeSession, RealtimeHandler) {
        var limits = node.realtime.limits.session
        configure(&limits)
        let session: RealtimeSession
        if limits.maxPipelinedWrites == node.realtime.limits.session.maxPipelinedWrites {
            // Registered with the node's hub, so it gets pushes.
            session = node.realtime.open(id: UUID().uuidString, namespace: "ns")!
        } else {
            session = RealtimeSession(id: UUID().uuidString, namespace: "ns", limits: limits)
        }
        let handler = RealtimeHandler(session: session, store: node.ports, config: node.config, policy: node.policy, reads: node.reads,
                                      pipeline: WirePipeline(writer: node.ports.writer, session: session))
        return (session, handler)
    }

    @Test func writesAreAnsweredInRequestOrderWithTheirOwnStatus() async throws {
        let (node, _) = try OperationsTests.makeNode()
        #expect(node.ports.writer.pipelinedWriter(sink: WireResponses(session: RealtimeSession(id: "x", namespace: "ns", limits: .init()), limit: 1)) != nil)
        let (session, handler) = connect(node)
        var want: [Int64: String] = [:]
        for r in 1...200 {
            switch r {
            case 50:
                await handler.handle(wireRequest(r, "p", #"{"p":"c/bad","d":{"a.b":1}}"#)); want[50] = "invalid_data"
            case 120:
                await handler.handle(wireRequest(r, "p", #"{"p":"c/k1","d":0,"h":"wrong"}"#)); want[120] = "datastale"
            case 150:
                await handler.handle(wireRequest(r, "m", #"{"p":"c","d":{"m":150}}"#)); want[150] = "ok"
            default:
                await handler.handle(wireRequest(r, "p", #"{"p":"c/k\#(r % 7)","d":\#(r)}"#)); want[Int64(r)] = "ok"
            }
        }
        // Waits for the 200 writes before it, so it reads their result.
        await handler.handle(wireRequest(201, "g", #"{"p":"c/k3","q":{}}"#))
        let messages = await drain(session, 201)
        let responses = messages.compactMap(wireResponse)
        #expect(responses.map(\.r) == (1...201).map { Int64($0) })
        #expect(Dictionary(uniqueKeysWithValues: responses.dropLast().map { ($0.r, $0.status) }) == want)
        #expect(responses.last?.status == "ok" && responses.last?.data == .int(199))
        let stored = try node.ports.reader.read(namespace: "ns", path: Path("c")).node
        #expect(stored.child("k6") == Node(.int(195)))
        #expect(stored.child("m") == Node(.int(150)))
        #expect(stored.child("bad").isEmpty)
    }

    @Test func aListenerGetsTheChangeBeforeTheWriterItsAck() async throws {
        let (node, _) = try OperationsTests.makeNode()
        let (session, handler) = connect(node)
        await handler.handle(wireRequest(1, "q", #"{"p":"/room","h":""}"#))
        for r in 2...21 { await handler.handle(wireRequest(r, "p", #"{"p":"room/x","d":\#(r)}"#)) }
        // Initial data + ok, then a push and an ack per write: each write's push before its ack
        // (a commit of several writes sends its pushes, then its acks), acks in request order.
        let messages = await drain(session, 2 + 40)
        var pushAt: [Int64: Int] = [:], ackAt: [Int64: Int] = [:]
        for (i, m) in messages.enumerated().dropFirst(2) {
            if let resp = wireResponse(m) {
                #expect(resp.status == "ok")
                ackAt[resp.r] = i
            } else if case .int(let v)? = m.objectValue?["d"]?.objectValue?["b"]?.objectValue?["d"] {
                pushAt[v] = i
            }
        }
        #expect(ackAt.keys.sorted() == (2...21).map { Int64($0) })
        #expect(ackAt.sorted { $0.key < $1.key }.map(\.value) == ackAt.values.sorted())
        for r in 2...21 { #expect(pushAt[Int64(r)]! < ackAt[Int64(r)]!) }
    }

    @Test func aClientOverTheLimitWaitsForRoomAndEverythingIsAnswered() async throws {
        let (node, _) = try OperationsTests.makeNode()
        let (session, handler) = connect(node) { $0.maxPipelinedWrites = 3 }
        let reader = Task { await drain(session, 100) }
        for r in 1...100 { await handler.handle(wireRequest(r, "p", #"{"p":"lim/k\#(r % 5)","d":\#(r)}"#)) }
        let responses = await reader.value.compactMap(wireResponse)
        #expect(responses.map(\.r) == (1...100).map { Int64($0) })
        #expect(responses.allSatisfy { $0.status == "ok" })
        #expect(try node.ports.reader.read(namespace: "ns", path: Path("lim/k0")).node == Node(.int(100)))
    }

    /// Every pipelined `p` asks whether it is a priority write; the byte check must agree with
    /// splitting the path.
    @Test func priorityTargetsAreRecognisedFromTheLastSegment() throws {
        #expect(try PriorityWrite.target(ofRawPath: "a/b/.priority") == Path("a/b"))
        #expect(try PriorityWrite.target(ofRawPath: "/a/.priority/") == Path("a"))
        #expect(try PriorityWrite.target(ofRawPath: ".priority") == Path.root)
        #expect(try PriorityWrite.target(ofRawPath: "a/x.priority") == nil)
        #expect(try PriorityWrite.target(ofRawPath: "a/.priority/b") == nil)
        #expect(try PriorityWrite.target(ofRawPath: "bench/w1/k2") == nil)
        #expect(try PriorityWrite.target(ofRawPath: "") == nil)
    }
}
