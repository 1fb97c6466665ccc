import EmberTestSupport
import Testing

@testable import EmberProtocol

/// Bytes as the tests hold them.
struct TestBytes: WebSocketPayload, Equatable {
    var bytes: [UInt8]
    init(_ s: String) { bytes = Array(s.utf8) }
    var byteCount: Int { bytes.count }
    mutating func append(_ other: TestBytes) { bytes += other.bytes }
}

/// The WebSocket rules of a server connection: fragments, ping and pong, the close handshake.
@Suite(.printsSeedOnFailure) struct WebSocketInboundTests {
    typealias Inbound = WebSocketInbound<TestBytes>

    func describe(_ a: Inbound.Action) -> String {
        switch a {
        case .none: "none"
        case .message(let m): "message " + String(decoding: m.bytes, as: UTF8.self)
        case .pong(let d): "pong " + String(decoding: d.bytes, as: UTF8.self)
        case .answerClose: "answerClose"
        case .closeSocket: "closeSocket"
        case .protocolError(let what): "protocolError " + what
        case .tooLarge: "tooLarge"
        }
    }

    @Test func fragmentsJoinIntoOneMessage() {
        var w = Inbound(maxMessageBytes: 100)
        let steps = [w.frame(.text, fin: false, TestBytes("ab")), w.frame(.ping, fin: true, TestBytes("p")),
                     w.frame(.continuation, fin: false, TestBytes("cd")), w.frame(.continuation, fin: true, TestBytes("e"))].map(describe)
        // A control frame may come between fragments (RFC 6455 §5.4).
        #expect(steps == ["none", "pong p", "none", "message abcde"])
        #expect(describe(w.frame(.text, fin: true, TestBytes("x"))) == "message x")
    }

    @Test func binaryMessagesAreIgnoredWholeOrFragmented() {
        var w = Inbound(maxMessageBytes: 4)
        #expect(describe(w.frame(.binary, fin: true, TestBytes("bin"))) == "none")
        // Its fragments are not kept, so they count against no limit.
        #expect(describe(w.frame(.binary, fin: false, TestBytes("12345"))) == "none")
        #expect(describe(w.frame(.continuation, fin: true, TestBytes("67890"))) == "none")
        #expect(describe(w.frame(.text, fin: true, TestBytes("t"))) == "message t")
    }

    @Test func framesOutOfOrderAreProtocolErrors() {
        var w = Inbound(maxMessageBytes: 100)
        #expect(describe(w.frame(.continuation, fin: true, TestBytes("x"))) == "protocolError a continuation without a message")
        _ = w.frame(.text, fin: false, TestBytes("a"))
        #expect(describe(w.frame(.text, fin: true, TestBytes("b"))) == "protocolError a new message before the last one ended")
        #expect(describe(w.frame(.ping, fin: false, TestBytes(""))) == "protocolError a fragmented ping")
    }

    @Test func aFragmentedMessageOverTheLimitIsTooLarge() {
        var w = Inbound(maxMessageBytes: 5)
        _ = w.frame(.text, fin: false, TestBytes("abc"))
        #expect(describe(w.frame(.continuation, fin: false, TestBytes("de"))) == "none")
        #expect(describe(w.frame(.continuation, fin: true, TestBytes("f"))) == "tooLarge")
    }

    @Test func theCloseHandshake() {
        // The client closes first: answered, and nothing more is handled.
        var w = Inbound(maxMessageBytes: 100)
        #expect(describe(w.frame(.close, fin: true, TestBytes(""))) == "answerClose")
        #expect(w.closing)
        #expect(describe(w.frame(.text, fin: true, TestBytes("late"))) == "none")
        #expect(describe(w.frame(.ping, fin: true, TestBytes("p"))) == "none")
        #expect(w.beginClose() == false)
        // The server closes first: the client's close frame is its answer, and the socket closes.
        var s = Inbound(maxMessageBytes: 100)
        #expect(s.beginClose() == true)
        #expect(s.beginClose() == false)
        #expect(describe(s.frame(.text, fin: true, TestBytes("late"))) == "none")
        #expect(describe(s.frame(.close, fin: true, TestBytes(""))) == "closeSocket")
    }

    @Test func aPingUnansweredByTheNextTickTimesOut() {
        var w = Inbound(maxMessageBytes: 100)
        #expect(w.pingDue() == .ping)
        _ = w.frame(.pong, fin: true, TestBytes(""))
        #expect(w.pingDue() == .ping)
        #expect(w.pingDue() == .timeout)
        var closing = Inbound(maxMessageBytes: 100)
        _ = closing.beginClose()
        #expect(closing.pingDue() == .none)
    }

    /// Seeded: a text message cut into random fragments (some empty), with pings between them,
    /// arrives whole and once; within the limit it is never refused.
    @Test func randomFragmentationsReassembleTheMessage() {
        var rng = TestSeed.generator(0x3e55)
        for _ in 0..<500 {
            let text = String((0..<rng.below(65)).map { _ in Character(Unicode.Scalar(UInt8(97 + rng.below(26)))) })
            var parts: [String] = []
            var rest = Substring(text)
            repeat {
                let n = min(rest.count, rng.below(9))
                parts.append(String(rest.prefix(n)))
                rest = rest.dropFirst(n)
            } while !rest.isEmpty
            var w = Inbound(maxMessageBytes: 64)
            var out: [String] = []
            for (i, part) in parts.enumerated() {
                let action = w.frame(i == 0 ? .text : .continuation, fin: i == parts.count - 1, TestBytes(part))
                if case .message(let m) = action { out.append(String(decoding: m.bytes, as: UTF8.self)) } else { #expect(describe(action) == "none") }
                if rng.chance(0.2) { #expect(describe(w.frame(.ping, fin: true, TestBytes("k"))) == "pong k") }
            }
            #expect(out == [text])
        }
    }
}

/// A client's frames as RFC 6455 §5.2 lays them out.
@Suite struct WebSocketClientFrameTests {
    @Test func theHeaderLengthsAndTheMask() {
        // RFC 6455 §5.7: a masked "Hello" with key 37 fa 21 3d.
        #expect(WebSocketClientFrame.encode(opcode: 0x1, payload: Array("Hello".utf8), mask: (0x37, 0xfa, 0x21, 0x3d))
                == [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58])
        let medium = WebSocketClientFrame.encode(opcode: 0x2, fin: false, payload: [UInt8](repeating: 7, count: 300))
        #expect(Array(medium.prefix(4)) == [0x02, 0x80 | 126, 0x01, 0x2C])
        #expect(medium.count == 4 + 4 + 300 && medium.suffix(300).allSatisfy { $0 == 7 })
        let large = WebSocketClientFrame.encode(opcode: 0x1, payload: [UInt8](repeating: 1, count: 70_000))
        #expect(Array(large.prefix(10)) == [0x81, 0x80 | 127, 0, 0, 0, 0, 0, 0x01, 0x11, 0x70])
    }
}

/// Frame headers read back (`WebSocketFrameHeader`): what the test and load clients parse the
/// server's frames with.
@Suite struct WebSocketFrameHeaderTests {
    @Test func everyLengthFormReadsBackAndAPartialHeaderIsNil() {
        // RFC 6455 §5.7: an unmasked "Hello" from a server, and the masked one from a client.
        #expect(WebSocketFrameHeader([0x81, 0x05, 0x48]) == WebSocketFrameHeader(fin: true, opcode: 1, masked: false, length: 2, payloadLength: 5))
        let masked = WebSocketClientFrame.encode(opcode: 0x1, payload: Array("Hello".utf8), mask: (0x37, 0xfa, 0x21, 0x3d))
        #expect(WebSocketFrameHeader(masked) == WebSocketFrameHeader(fin: true, opcode: 1, masked: true, length: 6, payloadLength: 5))
        for (count, headerLength) in [(0, 6), (125, 6), (126, 8), (300, 8), (65_535, 8), (65_536, 14), (70_000, 14)] {
            let frame = WebSocketClientFrame.encode(opcode: 0x2, fin: false, payload: [UInt8](repeating: 7, count: count))
            let header = WebSocketFrameHeader(frame)
            #expect(header == WebSocketFrameHeader(fin: false, opcode: 2, masked: true, length: headerLength, payloadLength: UInt64(count)))
            #expect(WebSocketFrameHeader.length(secondByte: frame[1]) == headerLength)
            #expect(frame.count == headerLength + count)
            // Every cut inside the header is "not yet".
            for cut in 0..<headerLength { #expect(WebSocketFrameHeader(frame.prefix(cut)) == nil) }
        }
    }
}
