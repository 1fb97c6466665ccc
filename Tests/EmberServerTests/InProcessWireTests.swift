import EmberCore
import EmberProtocol
import NIOCore
import Testing

@testable import EmberServer

/// The wire protocol over real sockets against a node in the test process (`InProcessNode`: port 0,
/// no emberd spawned): the WebSocket rules (`WebSocketInbound`), the order of pipelined writes and
/// other requests (`WireRequestRoute`) and the REST front feeding a WebSocket listener, end to end.
@Suite(.timeLimit(.minutes(2))) struct InProcessWireTests {
    /// Connects and reads the hello, which comes first.
    func open(_ server: InProcessNode) async throws -> TestWebSocket {
        let ws = try await TestWebSocket.connect(port: server.port)
        let hello = try #require(await ws.nextMessage())
        #expect(hello.objectValue?["t"] == .string("c"))
        return ws
    }

    @Test func aPingBetweenFragmentsIsAnsweredAndTheMessageArrivesWhole() async throws {
        try await InProcessNode.with { server in
            let ws = try await open(server)
            let request = Array(wireRequest(1, "g", #"{"p":"nothing","q":{}}"#).utf8)
            try await ws.send(TestWebSocket.text, fin: false, Array(request[..<10]))
            try await ws.send(TestWebSocket.ping, Array("are you there".utf8))
            try await ws.send(TestWebSocket.continuation, fin: false, Array(request[10..<20]))
            try await ws.send(TestWebSocket.continuation, fin: true, Array(request[20...]))
            var before: [JSON] = []
            let pong = try #require(await ws.nextControlFrame(skipped: &before))
            #expect(pong.opcode == TestWebSocket.pong && pong.text == "are you there")
            // The response comes once the message is whole, so after the pong.
            #expect(before.isEmpty)
            let response = try #require(await ws.nextMessage().flatMap(wireResponse))
            #expect(response.r == 1 && response.status == "ok" && response.data == .null)
            await ws.close()
        }
    }

    @Test func pipelinedWritesAreAnsweredInOrderAndTheGetAfterThemSeesThem() async throws {
        try await InProcessNode.with { server in
            let ws = try await open(server)
            // Sent without waiting: one read may carry many, handled on the event loop.
            for r in 1...60 { try await ws.request(r, "p", #"{"p":"counter","d":\#(r)}"#) }
            try await ws.request(61, "p", #"{"p":"bad","d":{"a.b":1}}"#)
            try await ws.request(62, "g", #"{"p":"counter","q":{}}"#)
            let responses = await ws.untilResponse(62).compactMap(wireResponse)
            #expect(responses.map(\.r) == Array(1...62))
            #expect(responses.prefix(60).allSatisfy { $0.status == "ok" })
            #expect(responses[60].status == "invalid_data")
            #expect(responses.last?.data == .int(60))
            // The REST front reads the same state.
            let rest = try await rawHTTP(port: server.port, "GET", "/counter.json?ns=ns")
            #expect(rest.status == 200 && rest.body == "60")
            await ws.close()
        }
    }

    @Test func aRestWriteReachesAWebSocketListenerBeforeItsAnswerIsRead() async throws {
        try await InProcessNode.with { server in
            let ws = try await open(server)
            try await ws.request(1, "q", #"{"p":"room","h":""}"#)
            let listened = await ws.untilResponse(1)
            #expect(wireResponse(listened.last!)?.status == "ok")
            let put = try await rawHTTP(port: server.port, "PUT", "/room/msg.json?ns=ns", body: #""hello""#)
            #expect(put.status == 200)
            let push = try #require(await ws.nextMessage())
            let body = push.objectValue?["d"]?.objectValue?["b"]?.objectValue
            #expect(body?["p"] == .string("room/msg") && body?["d"] == .string("hello"))
            await ws.close()
        }
    }

    @Test func aFrameOutOfOrderEndsTheSessionWithItsReason() async throws {
        try await InProcessNode.with { server in
            let ws = try await open(server)
            try await ws.send(TestWebSocket.continuation, fin: true, Array("stray".utf8))
            var messages: [JSON] = []
            let close = try #require(await ws.nextControlFrame(skipped: &messages))
            #expect(close.opcode == TestWebSocket.close && close.closeCode == 1000)
            #expect(String(decoding: close.payload.dropFirst(2), as: UTF8.self) == "protocol error: a continuation without a message")
            await ws.close()
        }
    }

    @Test func aClientCloseIsAnsweredWithItsCodeAndTheSocketCloses() async throws {
        try await InProcessNode.with { server in
            let ws = try await open(server)
            try await ws.send(TestWebSocket.close, [0x0F, 0xA1])  // 4001
            var messages: [JSON] = []
            let answer = try #require(await ws.nextControlFrame(skipped: &messages))
            #expect(answer.opcode == TestWebSocket.close && answer.closeCode == 4001)
            // Then the server closes the socket: the stream ends.
            #expect(await ws.nextFrame() == nil)
        }
    }

    @Test func aPeerThatNeverAnswersPingsIsPingedThenDisconnected() async throws {
        try await InProcessNode.with({ $0.realtimeLimits.session.pingIntervalSeconds = 0.2 }) { server in
            let ws = try await open(server)
            // This client answers nothing: frames until the server closes the socket.
            var opcodes: [UInt8] = []
            while let frame = await ws.nextFrame() { opcodes.append(frame.opcode) }
            #expect(opcodes.first == TestWebSocket.ping)
            #expect(opcodes.filter { $0 == TestWebSocket.ping }.count == 1, "closed at the first tick without a pong: \(opcodes)")
        }
    }

    @Test func aFragmentedMessageOverTheLimitEndsTheSessionWithTheReason() async throws {
        try await InProcessNode.with({ $0.realtimeLimits.session.maxMessageBytes = 1_000 }) { server in
            let ws = try await open(server)
            let part = [UInt8](repeating: UInt8(ascii: "x"), count: 400)
            try await ws.send(TestWebSocket.text, fin: false, part)
            try await ws.send(TestWebSocket.continuation, fin: false, part)
            try await ws.send(TestWebSocket.continuation, fin: false, part)
            var messages: [JSON] = []
            let close = try #require(await ws.nextControlFrame(skipped: &messages))
            #expect(close.opcode == TestWebSocket.close)
            #expect(String(decoding: close.payload.dropFirst(2), as: UTF8.self) == "message too large")
            await ws.close()
        }
    }

    /// More requests than the connection reads ahead (`WireConnection.Limits.maxQueuedRequests`),
    /// in one write: reading pauses and resumes (`WireRequestQueue`), every one is answered, in order.
    @Test func requestsSentAtOnceBeyondTheReadAheadAreAnsweredInOrder() async throws {
        try await InProcessNode.with { server in
            let ws = try await open(server)
            try await ws.request(1, "p", #"{"p":"burst","d":"x"}"#)
            let n = 300
            var burst: [UInt8] = []
            for r in 2...n {
                // Gets (not handled on the event loop) mixed with writes: all go through the queue.
                let text = r % 3 == 0 ? wireRequest(r, "p", #"{"p":"burst","d":\#(r)}"#) : wireRequest(r, "g", #"{"p":"burst","q":{}}"#)
                burst += WebSocketClientFrame.encode(opcode: TestWebSocket.text, payload: Array(text.utf8), mask: (1, 2, 3, 4))
            }
            try await ws.channel.writeAndFlush(ByteBuffer(bytes: burst)).get()
            let responses = await ws.untilResponse(Int64(n)).compactMap(wireResponse)
            #expect(responses.map(\.r) == Array(1...Int64(n)))
            #expect(responses.allSatisfy { $0.status == "ok" })
            // Each get saw the writes before it and none after.
            for g in responses where g.r % 3 != 0 && g.r > 1 {
                let last = (g.r / 3) * 3
                #expect(g.data == (last >= 3 ? .int(last) : .string("x")), "get \(g.r)")
            }
            await ws.close()
        }
    }
}
