import EmberCore
import EmberProtocol
import Foundation
import NIOCore
import NIOWebSocket
import Synchronization

/// One WebSocket connection speaking the Firebase wire protocol v5 (reference §6). Requests are
/// handled in arrival order; every message to the client goes through one bounded queue, so
/// pushes and responses keep commit order and a client that cannot keep up is disconnected.
public final class RealtimeSession: Sendable {
    public struct Limits: Sendable {
        /// Messages queued for one connection before it is closed as too slow (a session
        /// without a socket, whose frames wait in memory for a reader).
        public var outboundQueue = 10_000
        /// Bytes queued for one connection's socket and not yet written to it (encoded here or
        /// waiting in the channel) before the connection is cut off as a slow consumer.
        public var maxOutboundBytes = 64 << 20
        /// Largest reassembled inbound message.
        public var maxMessageBytes = 16 * 1024 * 1024
        /// Listens one connection may hold.
        public var maxListens = 10_000
        /// onDisconnect operations one connection may register.
        public var maxOnDisconnect = 1_000
        /// Writes of one connection queued and not yet answered; a client pipelining more is not
        /// read until some are answered.
        public var maxPipelinedWrites = 1_000
        /// Requests per second one connection may make; over it, requests get `too_many_requests`.
        public var requestRate = RequestRateLimit()
        /// Seconds between the server's pings (`WireConnection`); a connection whose previous
        /// ping got no pong by the next one is closed.
        public var pingIntervalSeconds: Double = 30
        public init() {}
    }

    /// The protocol's state and rules (`WireServerSession`); this class drives it: its lock, its
    /// socket, its timers and the hub's index.
    typealias Wire = WireServerSession<EmberWire>
    typealias Op = Wire.Effect

    struct State {
        var wire: Wire
        /// The name the onDisconnect log knows the session by, once it registered one.
        var onDisconnectSession: OnDisconnectRef?
        var expiryTimer: Task<Void, Never>?
        var requestBucket: TokenBucket?
        /// Frames queued for the socket, oldest first (at most `limits.outboundQueue`).
        var frames: [String] = []
        /// The socket writer waiting for frames (`nextFrames`).
        var frameWaiter: CheckedContinuation<[String]?, Never>?
        /// Set once the session writes straight to its socket (`attach`): frames are encoded
        /// into it and flushed on the event loop instead of queued in `frames`.
        var outbox: ConnectionOutbox?
        /// Runs once when the session ends (`attach`): starts the connection's close. No task
        /// waits per connection meanwhile.
        var onFinish: (@Sendable () -> Void)?
        /// Cleared when the hub forgets the session; later listens are not indexed.
        var indexed = true
    }

    public let id: String
    public let namespace: String
    /// The client's IP address (for `--trust-owner-from`), when the socket has one.
    public let address: String?
    /// The identity without a token: `.admin` for a connection with an admin client certificate
    /// (`ClientCertificate`), else anonymous. `unauth`, a refused `auth` and expiry return to it.
    public let baseIdentity: Identity
    let limits: Limits
    private let state: Mutex<State>
    /// Runs after the identity changed or expired (the rules layer re-judges the listens); takes
    /// the session so it does not keep itself alive.
    private let identityChangedHook = Mutex<(@Sendable (RealtimeSession) -> Void)?>(nil)
    /// A listen began (true) or ended (false): the hub keeps its index of listens by path
    /// (`PathIndex`) in step. Called under the state lock, so the index sees them in order.
    let listenIndexChanged = Mutex<(@Sendable (RealtimeSession, Path, String, Bool) -> Void)?>(nil)
    /// Connections cut off for not reading (the hub's counter; for status and metrics).
    let slowConsumers: SlowConsumerCount?
    /// The node's ordered change feed: write acknowledgements follow the changes on it.
    let feed: ChangeFeed?
    /// Opened when the connection's teardown is done (a newer connection that named this one
    /// with `ls` waits for it: `LastSession`).
    let tornDown = TeardownLatch()

    init(id: String, namespace: String, address: String? = nil, base: Identity = .anonymous, limits: Limits,
         slowConsumers: SlowConsumerCount? = nil, feed: ChangeFeed? = nil) {
        self.slowConsumers = slowConsumers
        self.feed = feed
        self.id = id
        self.namespace = namespace
        self.address = address
        self.baseIdentity = base
        self.limits = limits
        state = Mutex(State(wire: Wire(base: base, limits: .init(maxListens: limits.maxListens, maxOnDisconnect: limits.maxOnDisconnect))))
    }

    public var closeReason: String? { state.withLock { $0.wire.closeReason } }
    /// The socket the session writes to, once attached.
    var socketChannel: (any Channel)? { state.withLock { $0.outbox?.channel } }
    public var listenCount: Int { state.withLock { $0.wire.listenCount } }

    // MARK: - Sending (always under the state lock, which fixes the order)

    private func enqueue(_ s: inout State, _ message: JSON) {
        guard !s.wire.isClosed else { return }
        for frame in WireFraming.split(message.serialized()) { enqueue(&s, frame: frame) }
    }

    /// `frame` must be one whole frame (at most `WireFraming.maxFrameCharacters` characters).
    /// `batch`: the publish's flushes, grouped per event loop (nil: this connection's flush is
    /// scheduled on its own).
    private func enqueue(_ s: inout State, frame: String, batch: FlushBatch? = nil) {
        guard !s.wire.isClosed else { return }
        if s.outbox != nil {
            enqueueToSocket(&s, frame: frame, batch: batch)
            return
        }
        guard s.frames.count < limits.outboundQueue else {
            let closing = s.wire.close(reason: "outbound queue over \(limits.outboundQueue) messages: client too slow")
            perform(&s, closing)
            // The socket writer still sends what is queued, then closes.
            if let w = s.frameWaiter { s.frameWaiter = nil; w.resume(returning: nil) }
            return
        }
        s.frames.append(frame)
        if let w = s.frameWaiter {
            // A waiter exists only while the queue was empty: this frame is all there is.
            s.frameWaiter = nil
            w.resume(returning: s.frames)
            s.frames = []
        }
    }

    func finish(reason: String?) {
        state.withLock { s in
            if !s.wire.isClosed {
                let closing = s.wire.close(reason: reason)
                perform(&s, closing)
                if let w = s.frameWaiter { s.frameWaiter = nil; w.resume(returning: nil) }
            }
            if let f = s.onFinish { s.onFinish = nil; f() }
        }
    }

    // MARK: - Writing to a socket

    /// From now on frames go straight to `channel` (see `ConnectionOutbox`); frames queued so
    /// far go first. `onFinish` runs once when the session ends (it may run at once).
    func attach(channel: any Channel, onFinish: @escaping @Sendable () -> Void) {
        state.withLock { s in
            precondition(s.outbox == nil, "a session is attached to one socket")
            s.outbox = ConnectionOutbox(channel: channel)
            if s.wire.isClosed { onFinish() } else { s.onFinish = onFinish }
            let queued = s.frames
            s.frames = []
            for f in queued { enqueueToSocket(&s, frame: f, batch: nil) }
        }
    }

    private func enqueueToSocket(_ s: inout State, frame: String, batch: FlushBatch?) {
        let size = ConnectionOutbox.encodedSize(frame)
        guard s.outbox!.queuedBytes + size <= limits.maxOutboundBytes else {
            cutOff(&s)
            return
        }
        s.outbox!.append(frame)
        scheduleFlush(&s, batch: batch)
    }

    /// Frames already encoded (a fan-out's shared buffer), queued without a copy.
    private func enqueueToSocket(_ s: inout State, encoded: ByteBuffer, batch: FlushBatch?) {
        guard s.outbox!.queuedBytes + encoded.readableBytes <= limits.maxOutboundBytes else {
            cutOff(&s)
            return
        }
        s.outbox!.append(encoded: encoded)
        scheduleFlush(&s, batch: batch)
    }

    /// One flush per event-loop turn: the first frame after a flush schedules the next, with the
    /// publish's other connections on the same loop when it comes from a publish.
    private func scheduleFlush(_ s: inout State, batch: FlushBatch?) {
        guard !s.outbox!.flushScheduled else { return }
        s.outbox!.flushScheduled = true
        let loop = s.outbox!.channel.eventLoop
        if let batch {
            batch.add(self, loop: loop)
        } else {
            loop.execute { self.flushOutbox() }
        }
    }

    /// A client that stops reading: past `maxOutboundBytes` its connection is closed at once
    /// (its queued bytes dropped), without waiting for a close handshake it would not read.
    private func cutOff(_ s: inout State) {
        let closing = s.wire.close(reason: "outbound queue over \(limits.maxOutboundBytes) bytes: client not reading (slow consumer)")
        perform(&s, closing)
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
    private func takeAndWrite(endingFlushTurn: Bool) {
        let taken = state.withLock { s -> (ByteBuffer, any Channel, ChannelHandlerContext?)? in
            guard s.outbox != nil else { return nil }
            if endingFlushTurn { s.outbox!.flushScheduled = false }
            guard let buffer = s.outbox!.take() else { return nil }
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
            state.withLock { s in s.outbox?.inFlight -= n }
            return
        }
        let promise = channel.eventLoop.makePromise(of: Void.self)
        promise.futureResult.whenComplete { [self] _ in
            state.withLock { s in s.outbox?.inFlight -= n }
        }
        encoder.writeAndFlush(NIOAny(buffer), promise: promise)
    }

    /// After `finish`, on the channel's event loop: writes what is still pending at once, so the
    /// close frame written next follows it. Nothing for a connection that was cut off.
    func flushPendingNow() {
        takeAndWrite(endingFlushTurn: false)
    }

    /// Bytes queued for the socket and not yet written (tests, status).
    var outboundBytes: Int { state.withLock { $0.outbox?.queuedBytes ?? 0 } }

    /// The frames queued so far (at most `max`), oldest first, waiting while there is none; nil
    /// once the session is closed and its queue is empty. One consumer (the socket writer).
    func nextFrames(max: Int = .max) async -> [String]? {
        await withCheckedContinuation { (c: CheckedContinuation<[String]?, Never>) in
            state.withLock { s in
                if s.frames.count > max {
                    c.resume(returning: Array(s.frames[..<max]))
                    s.frames.removeFirst(max)
                } else if !s.frames.isEmpty {
                    c.resume(returning: s.frames)
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

    // MARK: - Fan-out

    /// Called in commit order for every change in this session's namespace.
    func deliver(_ change: CommittedChange) {
        deliver(SharedFrames(change: change))
    }

    /// As `deliver(_:)`, with untagged listens' frames shared with the other sessions of the
    /// same publish.
    func deliver(_ shared: SharedFrames) {
        state.withLock { s in
            guard !s.wire.isClosed else { return }
            var frames: [String] = []
            s.wire.forEachListen { l in frames += l.applyFrames(shared.change, shared: shared) }
            for frame in frames { enqueue(&s, frame: frame) }
        }
    }

    /// The change for the listen `key` only (one the hub's index found at `frames.path`); a
    /// listen ended meanwhile is skipped. An untagged listen on a socket queues the location's
    /// shared, already encoded buffer; its flush joins `batch` (one task per event loop).
    func deliver(_ frames: SharedPathFrames, key: String, batch: FlushBatch) {
        state.withLock { s in
            guard !s.wire.isClosed, let delivery = s.wire.withListen(key, { $0.delivery(of: frames.change, matched: true) }) else { return }
            switch delivery {
            case .nothing:
                return
            case .shared:
                if s.outbox != nil {
                    enqueueToSocket(&s, encoded: frames.encoded(for: s.outbox!.channel.eventLoop), batch: batch)
                } else {
                    for frame in frames.untagged {
                        enqueue(&s, frame: frame)
                        if s.wire.isClosed { return }
                    }
                }
            case .own(let messages):
                for frame in messages.flatMap({ WireFraming.split($0.serialized()) }) {
                    enqueue(&s, frame: frame, batch: batch)
                    if s.wire.isClosed { return }
                }
            }
        }
    }

    // MARK: - Driving the protocol

    /// Carries out the effects that are the connection's own — messages (in order, under the
    /// lock), the hub's index, the expiry timer — and collects the store operations for the
    /// handler in `ops`. Under the state lock. Stops after `identityChanged` and returns the
    /// effects after it: the caller runs the hook outside the lock first (the listens it revokes
    /// are told before, say, the `auth` response that follows).
    private func perform(_ s: inout State, _ effects: some Collection<Op>, ops: inout [Op]) -> ArraySlice<Op>? {
        for (i, e) in zip(effects.indices, effects) {
            switch e {
            case .send(let message): enqueue(&s, message)
            case .sendFrame(let frame): enqueue(&s, frame: frame)
            case .listenIndexed(let path, let key, let added): notifyIndex(&s, path, key, added)
            case .identityChanged: return ArraySlice(effects[effects.index(after: i)...])
            case .disarmExpiry:
                s.expiryTimer?.cancel()
                s.expiryTimer = nil
            case .armExpiry(let generation, let delay):
                s.expiryTimer = Task { [weak self] in
                    try? await Task.sleep(for: .milliseconds(delay))
                    guard !Task.isCancelled else { return }
                    self?.expiryTimerFired(generation: generation)
                }
            default: ops.append(e)
            }
        }
        return nil
    }

    private func perform(_ s: inout State, _ effects: [Op]) {
        var ops: [Op] = []
        let rest = perform(&s, effects, ops: &ops)
        assert(ops.isEmpty && rest == nil, "only the connection's own effects here")
    }

    /// Runs `step` on the protocol state and carries out its effects; returns the store
    /// operations for the handler, in order.
    @discardableResult
    func drive(_ step: (inout Wire) -> [Op]) -> [Op] {
        var ops: [Op] = []
        var rest = state.withLock { s in
            let effects = step(&s.wire)
            return perform(&s, effects, ops: &ops)
        }
        while let remaining = rest {
            runIdentityChangedHook()
            rest = state.withLock { s in perform(&s, remaining, ops: &ops) }
        }
        return ops
    }

    func send(_ message: JSON) {
        state.withLock { enqueue(&$0, message) }
    }

    /// Queues whole frames in order (pipelined write responses, built without a JSON value).
    func send(frames: [String]) {
        state.withLock { s in for f in frames { enqueue(&s, frame: f) } }
    }

    // MARK: - Listens

    /// The rules allowed listen `l` of request `r`: it joins the session (or is answered at once:
    /// a duplicate, one too many); the handler then reads its data (`.readListen`).
    func beginListen(r: Int64, _ l: Wire.ListenRequest) -> [Op] {
        drive { $0.beginListen(r: r, l) { WireListen(path: l.path, query: l.query, queryWire: l.queryWire, tag: l.tag) } }
    }

    /// Sends the initial data, then the `ok` (clients mark their cache complete on `ok`).
    func listenRead(r: Int64, _ l: Wire.ListenRequest, indexed: Bool, read: ReadResult) {
        drive { $0.listenRead(r: r, l, indexed: indexed) { $0.activate(with: read) } }
    }

    func endListen(_ l: Wire.ListenRequest) {
        drive { $0.endListen(l) }
    }

    /// Called under the state lock, so the hub's index sees a session's listens in order.
    private func notifyIndex(_ s: inout State, _ path: Path, _ key: String, _ added: Bool) {
        guard s.indexed else { return }
        if let hook = listenIndexChanged.withLock({ $0 }) { hook(self, path, key, added) }
    }

    /// The hub forgets the session: its listens leave the index, and later ones stay out of it.
    func removeFromIndex() {
        state.withLock { s in
            for (path, key) in s.wire.indexedListens { notifyIndex(&s, path, key, false) }
            s.indexed = false
        }
    }

    /// The listened locations (for `resync`, which reads them outside the state lock).
    var listenedPaths: [Path] {
        state.withLock { s in s.wire.isClosed ? [] : s.wire.indexedListens.map(\.path) }
    }

    /// The node's state was replaced from a snapshot: listens the rules no longer allow are
    /// cancelled (`c`), the others get their complete data again (`WireListen.resync`), queued
    /// ahead of every later push. `reads` holds the new data by path; a listen begun after they
    /// were taken has none here and reads the new state itself.
    func resync(reads: [Path: ReadResult], stillAllowed: (Path, QuerySpec, Identity) -> Bool) {
        revokeListens(stillAllowed: stillAllowed)
        state.withLock { s in
            guard !s.wire.isClosed else { return }
            var messages: [JSON] = []
            s.wire.forEachListenSorted { l in
                if let read = reads[l.path] { messages += l.resync(with: read) }
            }
            for m in messages { enqueue(&s, m) }
        }
    }

    /// Cancels the listens the rules no longer let this connection read: each gets a `c` push,
    /// which clients surface as permission_denied.
    func revokeListens(stillAllowed: (Path, QuerySpec, Identity) -> Bool) {
        drive { $0.revokeListens { l, identity in stillAllowed(l.path, l.query, identity) } }
    }

    // MARK: - onDisconnect

    func addOnDisconnect(_ write: OnDisconnectWrite) -> Bool {
        state.withLock { $0.wire.addOnDisconnect(write) }
    }

    /// A registration that failed: its write was the last added (requests are handled in order).
    func removeLastOnDisconnect() {
        state.withLock { $0.wire.removeLastOnDisconnect() }
    }

    func cancelOnDisconnect(at path: Path) {
        state.withLock { $0.wire.cancelOnDisconnect(at: path) }
    }

    /// How the log names this session (set by its first registration).
    var onDisconnectSession: OnDisconnectRef? {
        get { state.withLock { $0.onDisconnectSession } }
        set { state.withLock { $0.onDisconnectSession = newValue } }
    }

    // MARK: - Identity and request rate

    public var identity: Identity { state.withLock { $0.wire.identity } }

    /// The timer armed for `generation` fired (`WireServerSession.expiryTimerFired`).
    func expiryTimerFired(generation: Int) {
        drive { $0.expiryTimerFired(generation: generation) }
    }

    /// Called (outside the state lock) whenever the identity changes: `auth` as someone else,
    /// `unauth`, a refused re-auth, expiry.
    func onIdentityChanged(_ hook: @escaping @Sendable (RealtimeSession) -> Void) {
        identityChangedHook.withLock { $0 = hook }
    }

    private func runIdentityChangedHook() {
        if let hook = identityChangedHook.withLock({ $0 }) { hook(self) }
    }

    /// Takes one request from the connection's budget; false when it is over the rate limit.
    func admitRequest(now: Int64) -> Bool {
        state.withLock { s in
            if s.requestBucket == nil {
                guard let b = limits.requestRate.bucket(now: now) else { return true }
                s.requestBucket = b
            }
            return s.requestBucket!.take(now: now)
        }
    }
}

/// emberd's side of `WireServerSession`: its identities, listens and onDisconnect writes.
enum EmberWire: WireServerContext {
    typealias Identity = EmberNodeStore.Identity
    typealias Listen = WireListen
    typealias OnDisconnect = OnDisconnectWrite

    static func claims(of identity: Identity) -> JSON? { identity.authVariable }

    static func expiry(of identity: Identity) -> Int64? {
        if case .user(_, let expiresAt) = identity { return expiresAt }
        return nil
    }

    static func outranksTokens(_ identity: Identity) -> Bool { identity.isAdmin }

    static func cancel(_ writes: [OnDisconnectWrite], at path: Path) -> [OnDisconnectWrite] {
        OnDisconnectWrite.cancel(writes, at: path)
    }
}

/// Connections cut off as slow consumers, counted across a hub's sessions.
public final class SlowConsumerCount: Sendable {
    public let count = Atomic<Int>(0)
    public init() {}
}
