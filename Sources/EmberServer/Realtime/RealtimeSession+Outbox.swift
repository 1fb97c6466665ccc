import EmberCore
import EmberProtocol
import NIOCore
import NIOWebSocket
import Synchronization

/// A session's way to its client: every message goes through one queue under the state lock (which
/// fixes the order of pushes and responses), to the socket (`ConnectionOutbox`, flushed once per
/// event-loop turn) or, without one, to an in-memory queue a reader drains (`nextFrames`). The
/// rules — the bounds, when to flush, when a client that cannot keep up is cut off — are
/// `WireOutbound`'s; this carries them out.
extension RealtimeSession {
    // MARK: - Sending (always under the state lock, which fixes the order)

    func enqueue(_ s: inout State, _ message: JSON) {
        guard !s.wire.isClosed else { return }
        for frame in WireFraming.split(message.serialized()) { enqueue(&s, frame: frame) }
    }

    /// `frame` must be one whole frame (at most `WireFraming.maxFrameCharacters` characters).
    /// `batch`: the publish's flushes, grouped per event loop (nil: this connection's flush is
    /// scheduled on its own).
    func enqueue(_ s: inout State, frame: String, batch: FlushBatch? = nil) {
        guard !s.wire.isClosed else { return }
        if s.outbox != nil {
            enqueueToSocket(&s, frame: frame, batch: batch)
            return
        }
        if case .close(let reason) = s.outbound.offerMessage() {
            perform(&s, s.wire.close(reason: reason))
            // The socket writer still sends what is queued, then closes.
            if let w = s.frameWaiter { s.frameWaiter = nil; w.resume(returning: nil) }
            return
        }
        s.frames.append(frame)
        if let w = s.frameWaiter {
            // A waiter exists only while the queue was empty: this frame is all there is.
            s.frameWaiter = nil
            w.resume(returning: s.frames)
            s.outbound.took(messages: s.frames.count)
            s.frames = []
        }
    }

    // MARK: - Writing to a socket

    /// From now on frames go straight to `channel` (see `ConnectionOutbox`); frames queued so
    /// far go first. `onFinish` runs once when the session ends (it may run at once).
    func attach(channel: any Channel, onFinish: @escaping @Sendable () -> Void) {
        state.withLock { s in
            precondition(s.outbox == nil, "a session is attached to one socket")
            s.outbox = ConnectionOutbox(channel: channel)
            s.outbound.attached()
            if s.wire.isClosed { onFinish() } else { s.onFinish = onFinish }
            let queued = s.frames
            s.frames = []
            for f in queued { enqueueToSocket(&s, frame: f, batch: nil) }
        }
    }

    func enqueueToSocket(_ s: inout State, frame: String, batch: FlushBatch?) {
        guard admitToSocket(&s, bytes: WireOutbound.frameSize(payload: frame.utf8.count), batch: batch) else { return }
        s.outbox!.append(frame)
    }

    /// Frames already encoded (a fan-out's shared buffer), queued without a copy.
    func enqueueToSocket(_ s: inout State, encoded: ByteBuffer, batch: FlushBatch?) {
        guard admitToSocket(&s, bytes: encoded.readableBytes, batch: batch) else { return }
        s.outbox!.append(encoded: encoded)
    }

    /// Asks `WireOutbound` about `bytes` more for the socket: true when they are to be queued (a
    /// flush is scheduled for the first since the last flush: one per event-loop turn, with the
    /// publish's other connections on the same loop when it comes from a publish); a client over
    /// the bound is cut off.
    private func admitToSocket(_ s: inout State, bytes: Int, batch: FlushBatch?) -> Bool {
        switch s.outbound.offer(bytes: bytes) {
        case .queue(let scheduleFlush):
            if scheduleFlush {
                let loop = s.outbox!.channel.eventLoop
                if let batch { batch.add(self, loop: loop) } else { loop.execute { self.flushOutbox() } }
            }
            return true
        case .cutOff(let reason):
            cutOff(&s, reason: reason)
            return false
        case .close, .drop:
            return false
        }
    }

    /// A client that stops reading: its connection is closed at once (its queued bytes dropped),
    /// without waiting for a close handshake it would not read.
    func cutOff(_ s: inout State, reason: String) {
        perform(&s, s.wire.close(reason: reason))
        s.outbox!.discard()
        slowConsumers?.count.add(1, ordering: .relaxed)
        if let f = s.onFinish { s.onFinish = nil; f() }
        // Later on the event loop: closing fails the pending writes, whose callbacks take this
        // session's lock, held here.
        let channel = s.outbox!.channel
        channel.eventLoop.execute { channel.close(promise: nil) }
    }

    /// Writes and flushes what is pending, once (on the channel's event loop). Written just below
    /// the channel's WebSocket frame encoder, through any TLS.
    func flushOutbox() {
        takeAndWrite(endingFlushTurn: true)
    }

    /// Takes the pending bytes and writes them below the channel's WebSocket encoder, then
    /// flushes: one socket write for everything queued since the last flush. On the loop.
    func takeAndWrite(endingFlushTurn: Bool) {
        let taken = state.withLock { s -> (ByteBuffer, any Channel, ChannelHandlerContext?)? in
            guard s.outbox != nil, let n = s.outbound.take(endingFlushTurn: endingFlushTurn) else { return nil }
            let buffer = s.outbox!.take()!
            assert(buffer.readableBytes == n, "the outbox holds the bytes WireOutbound counts")
            if s.outbox!.encoderContext == nil {
                s.outbox!.encoderContext = try? s.outbox!.channel.pipeline.syncOperations.context(handlerType: WebSocketFrameEncoder.self)
            }
            return (buffer, s.outbox!.channel, s.outbox!.encoderContext)
        }
        guard let (buffer, channel, encoder) = taken else { return }
        channel.eventLoop.preconditionInEventLoop()
        let n = buffer.readableBytes
        guard let encoder else {
            // No encoder: the pipeline is being torn down. The bytes are dropped.
            state.withLock { s in s.outbound.written(n) }
            return
        }
        let promise = channel.eventLoop.makePromise(of: Void.self)
        promise.futureResult.whenComplete { [self] _ in
            state.withLock { s in s.outbound.written(n) }
        }
        encoder.writeAndFlush(NIOAny(buffer), promise: promise)
    }

    /// After `finish`, on the channel's event loop: writes what is still pending at once, so the
    /// close frame written next follows it. Nothing for a connection that was cut off.
    func flushPendingNow() {
        takeAndWrite(endingFlushTurn: false)
    }

    /// Bytes queued for the socket and not yet written (tests, status).
    var outboundBytes: Int { state.withLock { $0.outbound.queuedBytes } }

    /// The frames queued so far (at most `max`), oldest first, waiting while there is none; nil
    /// once the session is closed and its queue is empty. One consumer (the socket writer).
    func nextFrames(max: Int = .max) async -> [String]? {
        await withCheckedContinuation { (c: CheckedContinuation<[String]?, Never>) in
            state.withLock { s in
                if s.frames.count > max {
                    c.resume(returning: Array(s.frames[..<max]))
                    s.frames.removeFirst(max)
                    s.outbound.took(messages: max)
                } else if !s.frames.isEmpty {
                    c.resume(returning: s.frames)
                    s.outbound.took(messages: s.frames.count)
                    s.frames = []
                } else if s.wire.isClosed {
                    c.resume(returning: nil)
                } else {
                    precondition(s.frameWaiter == nil, "one consumer of a session's frames")
                    s.frameWaiter = c
                }
            }
        }
    }

    /// The queued frames one by one, taking each from the queue only when it is read (tests
    /// read a session this way, possibly in several loops).
    public var outbound: OutboundFrames { OutboundFrames(session: self) }

    public struct OutboundFrames: AsyncSequence, Sendable {
        let session: RealtimeSession
        public struct AsyncIterator: AsyncIteratorProtocol {
            let session: RealtimeSession
            public mutating func next() async -> String? {
                await session.nextFrames(max: 1)?.first
            }
        }
        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(session: session) }
    }
}

/// Connections cut off as slow consumers, counted across a hub's sessions.
public final class SlowConsumerCount: Sendable {
    public let count = Atomic<Int>(0)
    public init() {}
}
