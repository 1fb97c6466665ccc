import EmberProtocol
import NIOCore

/// The bytes a WebSocket session has queued for its socket (kept in the session's state, under
/// its lock). Frames are encoded into one buffer as they come; the first frame after a flush
/// schedules one flush on the channel's event loop, which writes the whole buffer at once: a
/// connection that gets many events in one event-loop turn is written and flushed once.
///
/// A fan-out frame arrives already encoded and shared by every listener of its location
/// (`SharedFrames.encoded`): when nothing else is pending, the outbox keeps a reference to that
/// very buffer (no copy, no allocation); a second frame in the same turn copies it once (the
/// buffer is copy-on-write) and appends.
///
/// What may be queued, when to flush and when to cut a client off are `WireOutbound`'s rules (the
/// session keeps one beside this buffer); this holds the bytes.
struct ConnectionOutbox {
    let channel: any Channel
    /// The WebSocket frame encoder's context, below which the encoded bytes are written: looked
    /// up on the first flush (on the event loop) instead of walking the pipeline per flush.
    var encoderContext: ChannelHandlerContext?
    /// Encoded frames waiting for the next flush; allocated on first use, dropped after each
    /// flush (an idle connection holds no buffer).
    private(set) var pending: ByteBuffer?

    init(channel: any Channel) {
        self.channel = channel
    }

    /// Appends one text frame, encoded (RFC 6455: FIN + text opcode, unmasked as a server's are).
    mutating func append(_ text: String) {
        if pending == nil {
            pending = channel.allocator.buffer(capacity: WireOutbound.frameSize(payload: text.utf8.count))
        }
        Self.appendTextFrame(text, to: &pending!)
    }

    /// Appends frames already encoded (a shared fan-out buffer): kept as is when nothing is
    /// pending, else copied behind what is.
    mutating func append(encoded: ByteBuffer) {
        if pending == nil {
            pending = encoded
        } else {
            pending!.writeImmutableBuffer(encoded)
        }
    }

    /// Takes the pending bytes for a write.
    mutating func take() -> ByteBuffer? {
        guard let buffer = pending, buffer.readableBytes > 0 else { return nil }
        pending = nil
        return buffer
    }

    /// Forgets the pending bytes (the connection is being cut off).
    mutating func discard() {
        pending = nil
    }

    static func appendTextFrame(_ text: String, to buffer: inout ByteBuffer) {
        let n = text.utf8.count
        buffer.writeInteger(UInt8(0x81))
        if n < 126 {
            buffer.writeInteger(UInt8(n))
        } else if n <= 0xFFFF {
            buffer.writeInteger(UInt8(126))
            buffer.writeInteger(UInt16(n))
        } else {
            buffer.writeInteger(UInt8(127))
            buffer.writeInteger(UInt64(n))
        }
        buffer.writeString(text)
    }
}
