/// A client's WebSocket frame as RFC 6455 §5.2 lays it out: FIN and opcode, the length in 7, 16 or
/// 64 bits, and the masking key a client must send, the payload XORed with it. For Ember's own
/// test and load clients, which write frames byte by byte to control each one.
public enum WebSocketClientFrame {
    /// The frame's bytes. The all-zero `mask` leaves the payload as it is (no work per byte).
    public static func encode(opcode: UInt8, fin: Bool = true, payload: [UInt8], mask: (UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0)) -> [UInt8] {
        var b = header(opcode: opcode, fin: fin, payloadLength: payload.count, mask: mask)
        b.reserveCapacity(b.count + payload.count)
        let key = [mask.0, mask.1, mask.2, mask.3]
        if key == [0, 0, 0, 0] {
            b += payload
        } else {
            b += payload.enumerated().map { $0.element ^ key[$0.offset % 4] }
        }
        return b
    }

    /// The frame's header alone (its payload, masked with `mask`, follows): for a client that
    /// writes the payload from a buffer of its own. The all-zero `mask` leaves the payload as it is.
    public static func header(opcode: UInt8, fin: Bool = true, payloadLength n: Int, mask: (UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0)) -> [UInt8] {
        precondition(opcode < 0x10, "an opcode is four bits")
        var b: [UInt8] = []
        b.reserveCapacity(14)
        b.append((fin ? 0x80 : 0) | opcode)
        if n < 126 {
            b.append(0x80 | UInt8(n))
        } else if n <= 0xFFFF {
            b.append(0x80 | 126)
            b += [UInt8(n >> 8), UInt8(n & 0xFF)]
        } else {
            b.append(0x80 | 127)
            b += (0..<8).reversed().map { UInt8((n >> ($0 * 8)) & 0xFF) }
        }
        b += [mask.0, mask.1, mask.2, mask.3]
        return b
    }
}
