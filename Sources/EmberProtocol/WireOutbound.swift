/// The backpressure rules of a server connection's outbound messages, sans-IO: the driver
/// (`RealtimeSession`) holds the frames and the socket and asks this value what to do with each.
///
/// Two ways out, one after the other:
/// - **in memory** (no socket yet, or a reader that drains frames itself): at most
///   `maxMessages` frames wait; one more closes the session as too slow (what is queued is still
///   sent, then the close);
/// - **to the socket** (after `attached`): frames are encoded into one pending buffer and flushed
///   once per event-loop turn — the first frame after a flush schedules the next flush. The bytes
///   pending plus those handed to the socket and not yet written are bounded by `maxBytes`: a
///   client that stops reading is cut off at once (its pending bytes dropped, no close handshake it
///   would not read), so it holds at most that much of the server's memory.
public struct WireOutbound: Sendable {
    public struct Limits: Sendable, Equatable {
        /// Frames waiting in memory before the session is closed as too slow.
        public var maxMessages: Int
        /// Bytes pending or in flight to the socket before the connection is cut off.
        public var maxBytes: Int

        public init(maxMessages: Int, maxBytes: Int) {
            precondition(maxMessages > 0 && maxBytes > 0, "outbound limits are positive")
            self.maxMessages = maxMessages
            self.maxBytes = maxBytes
        }
    }

    public enum Admission: Equatable, Sendable {
        /// Queue the frame; `scheduleFlush`: it is the first since the last flush, so schedule one.
        case queue(scheduleFlush: Bool)
        /// Over `maxMessages` in memory: close the session with this reason (frames already
        /// queued still go out). The frame is not queued.
        case close(reason: String)
        /// Over `maxBytes` to the socket: drop the pending bytes and close the socket now, with
        /// this reason. The frame is not queued.
        case cutOff(reason: String)
        /// The connection was cut off already: nothing is queued any more.
        case drop
    }

    public let limits: Limits
    /// Frames waiting in memory (before `attached`).
    public private(set) var messages = 0
    /// Bytes encoded for the socket and not yet taken by a flush.
    public private(set) var pendingBytes = 0
    /// Bytes handed to the socket whose write has not completed.
    public private(set) var inFlightBytes = 0
    /// A flush is scheduled and has not taken the pending bytes yet.
    public private(set) var flushScheduled = false
    public private(set) var isAttached = false
    public private(set) var isCutOff = false

    public init(limits: Limits) {
        self.limits = limits
    }

    /// What the client has not read yet, as far as the bound goes.
    public var queuedBytes: Int { pendingBytes + inFlightBytes }

    /// One frame for the in-memory queue.
    public mutating func offerMessage() -> Admission {
        precondition(!isAttached, "an attached connection queues bytes (offer(bytes:))")
        guard messages < limits.maxMessages else {
            return .close(reason: "outbound queue over \(limits.maxMessages) messages: client too slow")
        }
        messages += 1
        return .queue(scheduleFlush: false)
    }

    /// The reader took `count` frames from the in-memory queue.
    public mutating func took(messages count: Int) {
        precondition(count >= 0 && count <= messages, "took more frames than were queued")
        messages -= count
    }

    /// From now on frames go to the socket; those still in memory are offered again as bytes.
    public mutating func attached() {
        precondition(!isAttached, "a connection is attached to one socket")
        isAttached = true
        messages = 0
    }

    /// One encoded frame (or a shared buffer of frames) of `bytes` for the socket.
    public mutating func offer(bytes: Int) -> Admission {
        precondition(isAttached, "bytes go to an attached socket")
        guard !isCutOff else { return .drop }
        guard queuedBytes + bytes <= limits.maxBytes else {
            isCutOff = true
            pendingBytes = 0
            return .cutOff(reason: "outbound queue over \(limits.maxBytes) bytes: client not reading (slow consumer)")
        }
        pendingBytes += bytes
        defer { flushScheduled = true }
        return .queue(scheduleFlush: !flushScheduled)
    }

    /// A flush takes the pending bytes for one socket write (nil: nothing pending); they count as
    /// in flight until `written`. `endingFlushTurn`: this is the scheduled flush (the next frame
    /// schedules another); false for a write outside the turn (before a close frame).
    public mutating func take(endingFlushTurn: Bool) -> Int? {
        if endingFlushTurn { flushScheduled = false }
        guard pendingBytes > 0, !isCutOff else { return nil }
        defer { pendingBytes = 0 }
        inFlightBytes += pendingBytes
        return pendingBytes
    }

    /// A write of `bytes` taken by `take` completed (or failed, or was dropped).
    public mutating func written(_ bytes: Int) {
        precondition(bytes >= 0 && bytes <= inFlightBytes, "wrote more than was in flight")
        inFlightBytes -= bytes
    }

    /// Bytes of a server's (unmasked) frame carrying `payload` bytes: header (2, 4 or 10) and payload.
    public static func frameSize(payload n: Int) -> Int {
        n + (n < 126 ? 2 : n <= 0xFFFF ? 4 : 10)
    }
}
