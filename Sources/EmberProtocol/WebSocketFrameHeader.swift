/// A WebSocket frame's header as RFC 6455 §5.2 lays it out — FIN and opcode, whether a masking key
/// follows, the payload length in 7, 16 or 64 bits — read from the bytes a socket gave so far. For
/// Ember's own test and load clients, which read the server's frames byte by byte (emberd itself
/// reads frames with NIO's codec).
public struct WebSocketFrameHeader: Equatable, Sendable {
    public var fin: Bool
    public var opcode: UInt8
    public var masked: Bool
    /// Bytes of the header: 2, plus 2 or 8 of extended length, plus 4 of masking key.
    public var length: Int
    public var payloadLength: UInt64

    public init(fin: Bool, opcode: UInt8, masked: Bool, length: Int, payloadLength: UInt64) {
        self.fin = fin
        self.opcode = opcode
        self.masked = masked
        self.length = length
        self.payloadLength = payloadLength
    }

    /// Bytes of the whole header, known from its second byte alone.
    public static func length(secondByte b1: UInt8) -> Int {
        let extended = switch b1 & 0x7F {
        case 126: 2
        case 127: 8
        default: 0
        }
        return 2 + extended + (b1 & 0x80 != 0 ? 4 : 0)
    }

    /// The header at the start of `bytes`, or nil while they do not hold all of it.
    public init?(_ bytes: some Collection<UInt8>) {
        var it = bytes.makeIterator()
        guard let b0 = it.next(), let b1 = it.next() else { return nil }
        let length = Self.length(secondByte: b1)
        guard bytes.count >= length else { return nil }
        var payload = UInt64(b1 & 0x7F)
        let extended = payload == 126 ? 2 : payload == 127 ? 8 : 0
        if extended > 0 {
            payload = 0
            for _ in 0..<extended { payload = payload << 8 | UInt64(it.next()!) }
        }
        self.fin = b0 & 0x80 != 0
        self.opcode = b0 & 0x0F
        self.masked = b1 & 0x80 != 0
        self.length = length
        self.payloadLength = payload
    }
}
