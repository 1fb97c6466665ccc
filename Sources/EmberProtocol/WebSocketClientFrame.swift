/// A client's WebSocket frame as RFC 6455 §5.2 lays it out: FIN and opcode, the length in 7, 16 or
/// 64 bits, and the masking key a client must send, the payload XORed with it. For Ember's own
/// test and load clients, which write frames byte by byte to control each one.
public enum WebSocketClientFrame {
    /// The frame's bytes. The all-zero `mask` leaves the payload as it is (no work per byte).
    public static func encode(opcode: UInt8, fin: Bool = true, payload: [UInt8], mask: (UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0)) -> [UInt8] {
        precondition(opcode < 0x10, "an opcode is four bits")
        var b: [UInt8] = []
        b.reserveCapacity(payload.count + 14)
        b.append((fin ? 0x80 : 0) | opcode)
        if payload.count < 126 {
            b.append(0x80 | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            b.append(0x80 | 126)
            b += [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            b.append(0x80 | 127)
            b += (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xFF) }
        }
        let key = [mask.0, mask.1, mask.2, mask.3]
        b += key
        if key == [0, 0, 0, 0] {
            b += payload
        } else {
            b += payload.enumerated().map { $0.element ^ key[$0.offset % 4] }
        }
        return b
    }
}
