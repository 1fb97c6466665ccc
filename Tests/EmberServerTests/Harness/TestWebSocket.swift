import EmberCore
import EmberProtocol
import NIOCore

/// A WebSocket client over a plain TCP socket, its frames written byte by byte as RFC 6455 says,
/// so a test controls every frame (fragments, pings, close) and sees every frame the server sends.
/// One task uses it at a time.
final class TestWebSocket {
    struct Frame: Equatable {
        var fin: Bool
        var opcode: UInt8
        var payload: [UInt8]
        var text: String { String(decoding: payload, as: UTF8.self) }
        /// A close frame's status code.
        var closeCode: Int? { opcode == 0x8 && payload.count >= 2 ? Int(payload[0]) << 8 | Int(payload[1]) : nil }
    }

    static let text: UInt8 = 0x1, binary: UInt8 = 0x2, continuation: UInt8 = 0x0, close: UInt8 = 0x8, ping: UInt8 = 0x9, pong: UInt8 = 0xA

    let channel: any Channel
    private var reader: ByteReader

    private init(channel: any Channel, reader: ByteReader) {
        self.channel = channel
        self.reader = reader
    }

    /// Connects and upgrades (`/.ws?v=5&ns=NS`); fails unless the server answers 101.
    static func connect(port: Int, target: String = "/.ws?v=5&ns=ns") async throws -> TestWebSocket {
        let (channel, received) = try await connectTCP(port: port)
        try await channel.writeAndFlush(ByteBuffer(string: WebSocketUpgrade.request(host: "127.0.0.1:\(port)", target: target))).get()
        var reader = ByteReader(received)
        guard let answer = await reader.take(through: Array("\r\n\r\n".utf8)) else { throw HarnessFailure("closed during the upgrade") }
        let status = String(decoding: answer, as: UTF8.self)
        guard WebSocketUpgrade.accepted(status) else { throw HarnessFailure("upgrade refused: \(status)") }
        return TestWebSocket(channel: channel, reader: reader)
    }

    /// Sends one frame, masked as a client must.
    func send(_ opcode: UInt8, fin: Bool = true, _ payload: [UInt8]) async throws {
        let frame = WebSocketClientFrame.encode(opcode: opcode, fin: fin, payload: payload, mask: (0x12, 0x34, 0x56, 0x78))
        try await channel.writeAndFlush(ByteBuffer(bytes: frame)).get()
    }

    func send(text: String) async throws { try await send(Self.text, Array(text.utf8)) }

    /// A wire request `{"t":"d","d":{"r":r,"a":action,"b":body}}` as one frame.
    func request(_ r: Int, _ action: String, _ body: String) async throws {
        try await send(text: wireRequest(r, action, body))
    }

    /// The server's next frame; nil once it closed the socket.
    func nextFrame() async -> Frame? {
        guard var head = await reader.take(2) else { return nil }
        let rest = WebSocketFrameHeader.length(secondByte: head[1]) - 2
        if rest > 0 {
            guard let more = await reader.take(rest) else { return nil }
            head += more
        }
        guard let header = WebSocketFrameHeader(head), let payload = await reader.take(Int(header.payloadLength)) else { return nil }
        return Frame(fin: header.fin, opcode: header.opcode, payload: payload)
    }

    /// The next data message as JSON, skipping the server's pings; nil at a close frame or the
    /// socket's end.
    func nextMessage() async -> JSON? {
        while let frame = await nextFrame() {
            switch frame.opcode {
            case Self.text: return try? JSON.parse(frame.text)
            case Self.ping, Self.pong: continue
            default: return nil
            }
        }
        return nil
    }

    /// The next frame that is not a data message (pong, close), data messages before it
    /// collected in `skipped`.
    func nextControlFrame(skipped: inout [JSON]) async -> Frame? {
        while let frame = await nextFrame() {
            if frame.opcode == Self.text, let m = try? JSON.parse(frame.text) { skipped.append(m); continue }
            return frame
        }
        return nil
    }

    /// Messages until the response to request `r`, which is last.
    func untilResponse(_ r: Int64) async -> [JSON] {
        var out: [JSON] = []
        while let m = await nextMessage() {
            out.append(m)
            if wireResponse(m)?.r == r { break }
        }
        return out
    }

    func close() async { try? await channel.close().get() }
}
