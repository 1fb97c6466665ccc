/// The bytes of a frame's payload as the driver holds them (emberd: a NIO `ByteBuffer`); the rules
/// look only at their size and join a fragmented message's parts.
public protocol WebSocketPayload {
    var byteCount: Int { get }
    mutating func append(_ other: Self)
}

/// The WebSocket rules of a server connection above the frame codec (RFC 6455): fragmented
/// messages (§5.4) and their size limit, ping and pong (§5.5.2-3) with the server's liveness
/// check, the close handshake (§5.5.1). Sans-IO: frames and timer ticks in, decisions out; the
/// driver (`WireConnection`) reads and writes the socket and carries them out.
public struct WebSocketInbound<Payload: WebSocketPayload> {
    public enum Opcode: Sendable {
        case text, binary, continuation, ping, pong, close
        /// Reserved opcodes: ignored.
        case other
    }

    public enum Action {
        case none
        /// A whole text message (one frame, or its fragments joined). Binary messages are ignored.
        case message(Payload)
        /// Answer a ping with a pong carrying its data.
        case pong(Payload)
        /// The client closes: answer with a close frame carrying the code in `Payload` (normal
        /// closure when it has none), then close the socket.
        case answerClose(Payload)
        /// The client answered the server's close frame: close the socket.
        case closeSocket
        /// A frame out of order: the connection ends with this reason.
        case protocolError(String)
        /// A fragmented message past `maxMessageBytes`: the connection ends.
        case tooLarge
    }

    /// Named limit: the largest message reassembled from fragments.
    public let maxMessageBytes: Int
    /// A text message arriving in fragments (nil for a binary one, whose bytes are not kept).
    private var fragments: Payload?
    private var inFragments = false
    private var awaitingPong = false
    /// The server's close frame is sent (or the client's answered): no more messages are
    /// handled, and the socket closes on the client's close frame or a timeout.
    public private(set) var closing = false

    public init(maxMessageBytes: Int) {
        self.maxMessageBytes = maxMessageBytes
    }

    /// One frame from the client.
    public mutating func frame(_ opcode: Opcode, fin: Bool, _ data: Payload) -> Action {
        switch opcode {
        case .text, .binary:
            guard !inFragments else { return .protocolError("a new message before the last one ended") }
            if fin { return opcode == .text ? whole(data) : .none }
            inFragments = true
            fragments = opcode == .text ? data : nil
            return .none
        case .continuation:
            guard inFragments else { return .protocolError("a continuation without a message") }
            if fragments != nil {
                guard fragments!.byteCount + data.byteCount <= maxMessageBytes else { return .tooLarge }
                fragments!.append(data)
            }
            guard fin else { return .none }
            inFragments = false
            defer { fragments = nil }
            return fragments.map { whole($0) } ?? .none
        case .ping:
            guard fin else { return .protocolError("a fragmented ping") }
            return closing ? .none : .pong(data)
        case .pong:
            awaitingPong = false
            return .none
        case .close:
            if closing { return .closeSocket }
            closing = true
            return .answerClose(data)
        case .other:
            return .none
        }
    }

    private func whole(_ message: Payload) -> Action {
        closing ? .none : .message(message)
    }

    /// The server sends its close frame (the session ended, or the connection is refused): false
    /// when it already did (or answered the client's).
    public mutating func beginClose() -> Bool {
        guard !closing else { return false }
        closing = true
        return true
    }

    public enum Liveness: Equatable, Sendable {
        /// Closing already: nothing.
        case none
        /// Send a ping; its pong must arrive before the next tick.
        case ping
        /// The last ping got no pong: the peer is gone, close the connection.
        case timeout
    }

    /// The ping timer fired (every `pingIntervalSeconds`).
    public mutating func pingDue() -> Liveness {
        guard !closing else { return .none }
        if awaitingPong { return .timeout }
        awaitingPong = true
        return .ping
    }
}
