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
/// `queuedBytes` counts what is encoded here plus what was handed to the channel and not yet
/// written to the socket; the session cuts the connection off once that passes its bound
/// (`RealtimeSession.Limits.maxOutboundBytes`), so a client that stops reading holds at most
/// that much memory.
struct ConnectionOutbox {
    let channel: any Channel
    /// The WebSocket frame encoder's context, below which the encoded bytes are written: looked
    /// up on the first flush (on the event loop) instead of walking the pipeline per flush.
    var encoderContext: ChannelHandlerContext?
    /// Encoded frames waiting for the next flush; allocated on first use, dropped after each
    /// flush (an idle connection holds no buffer).
    private(set) var pending: ByteBuffer?
    /// A flush is scheduled on the event loop and has not taken `pending` yet.
    var flushScheduled = false
    /// Bytes handed to the channel whose write has not completed.
    var inFlight = 0

    init(channel: any Channel) {
        self.channel = channel
    }

    var queuedBytes: Int { (pending?.readableBytes ?? 0) + inFlight }

    /// Appends one text frame, encoded (RFC 6455: FIN + text opcode, unmasked as a server's are).
    mutating func append(_ text: String) {
        if pending == nil {
            pending = channel.allocator.buffer(capacity: Self.encodedSize(text))
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

    /// Takes the pending bytes for a write, counting them in flight until the write completes.
    mutating func take() -> ByteBuffer? {
        guard let buffer = pending, buffer.readableBytes > 0 else { return nil }
        pending = nil
        inFlight += buffer.readableBytes
        return buffer
    }

    /// Forgets the pending bytes (the connection is being cut off).
    mutating func discard() {
        pending = nil
    }

    /// Size of `text` as a frame: header (2, 4 or 10 bytes) and payload.
    static func encodedSize(_ text: String) -> Int {
        let n = text.utf8.count
        return n + (n < 126 ? 2 : n <= 0xFFFF ? 4 : 10)
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
