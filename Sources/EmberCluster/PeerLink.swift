import EmberNodeStore
import EmberRaft
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// The outbound connection to one peer: dials on demand, verifies the peer's certificate names
/// it, reconnects with exponential backoff, and holds a bounded queue while disconnected.
final class PeerLink: Sendable {
    let peer: NodeID
    let address: PeerAddress
    let group: MultiThreadedEventLoopGroup
    let tls: PeerTLS
    let queueLimit: Int
    let backoffMin: Int64
    let backoffMax: Int64
    let logger: Logger
    /// Frames the accepting side writes back (only `.notMember`).
    let onNotice: @Sendable (PeerFrame, NodeID) -> Void

    /// Bytes buffered in a connected channel before we stop writing to it (frames are dropped
    /// while above it; Raft re-sends what matters).
    static let writeBufferHigh = 8 << 20
    static let writeBufferLow = 4 << 20
    static let connectTimeout = TimeAmount.seconds(2)
    /// Frames and bytes handed to a connected channel that wait for its event loop's next turn.
    /// One loop turn writes them all and flushes once (one TLS record run, one syscall) instead
    /// of one flush per frame; past either limit frames are dropped like a slow peer's.
    static let outboxFrameLimit = 4_096
    static let outboxByteLimit = 16 << 20

    struct State {
        var channel: (any Channel)?
        /// Frames sent while not connected, each with the peer protocol level it needs (known
        /// once connected: the ones the peer does not speak are dropped then).
        var queue = CircularBuffer<(frame: ByteBuffer, level: Int)>()
        var connecting = false
        var retryScheduled = false
        var backoffMillis: Int64
        var nextAttempt = NIODeadline.uptimeNanoseconds(0)
        var closed = false
        var dropped: UInt64 = 0
        var everConnected = false
        /// The peer protocol level the connected peer accepted by ALPN (`PeerTLS.level`), learnt
        /// anew on every connection.
        var level = 1
        /// `level` of a connection that is up: 1 while not connected (frames queued meanwhile
        /// must be ones every build knows).
        var speaks: Int { channel != nil ? level : 1 }
        /// Frames for the connected channel not yet written (drained once per event-loop turn).
        var outbox: [ByteBuffer] = []
        var outboxBytes = 0
        var drainScheduled = false
    }
    private let state: Mutex<State>

    init(peer: NodeID, address: PeerAddress, group: MultiThreadedEventLoopGroup, tls: PeerTLS,
         queueLimit: Int, backoff: (Int, Int), logger: Logger,
         onNotice: @escaping @Sendable (PeerFrame, NodeID) -> Void = { _, _ in }) {
        precondition(queueLimit > 0 && backoff.0 > 0 && backoff.1 >= backoff.0)
        self.peer = peer
        self.address = address
        self.group = group
        self.tls = tls
        self.queueLimit = queueLimit
        self.backoffMin = Int64(backoff.0)
        self.backoffMax = Int64(backoff.1)
        self.logger = logger
        self.onNotice = onNotice
        self.state = Mutex(State(backoffMillis: Int64(backoff.0)))
    }

    var isConnected: Bool { state.withLock { $0.channel != nil } }

    /// The level the peer accepted on its last connection (kept while it is down: a member
    /// restarted with an older build is learnt anew when it reconnects); nil before the first.
    var knownLevel: Int? { state.withLock { $0.everConnected ? $0.level : nil } }

    /// The level of the connection that is up (nil while not connected).
    var connectedLevel: Int? { state.withLock { $0.channel != nil ? $0.level : nil } }

    /// For `/.ember/status`: connected, frames waiting, frames dropped (queue full or slow peer).
    var stats: (connected: Bool, queued: Int, dropped: UInt64, level: Int) {
        state.withLock { ($0.channel != nil, $0.queue.count, $0.dropped, $0.speaks) }
    }

    /// Sends `frame`, which only peers speaking `level` or later decode (dropped for others).
    func send(_ frame: ByteBuffer, level: Int = 1) {
        let (drainOn, dial) = state.withLock { s -> ((any Channel)?, Bool) in
            if s.closed { return (nil, false) }
            if let ch = s.channel {
                if level > s.level { return (nil, false) }
                // A frame larger than the byte limit still goes out alone (a big entry or chunk).
                guard ch.isWritable, s.outbox.isEmpty || (s.outbox.count < Self.outboxFrameLimit
                      && s.outboxBytes + frame.readableBytes <= Self.outboxByteLimit)
                else { s.dropped += 1; return (nil, false) }
                s.outbox.append(frame)
                s.outboxBytes += frame.readableBytes
                if s.drainScheduled { return (nil, false) }
                s.drainScheduled = true
                return (ch, false)
            }
            if s.queue.count >= queueLimit { s.queue.removeFirst(); s.dropped += 1 }
            s.queue.append((frame, level))
            return (nil, startDialIfDue(&s))
        }
        if let drainOn { drainOn.eventLoop.execute { self.drain(drainOn) } }
        if dial { dialNow() }
    }

    /// On the channel's event loop: writes every frame sent since the last drain, flushes once.
    private func drain(_ channel: any Channel) {
        let (frames, moveTo) = state.withLock { s -> ([ByteBuffer], (any Channel)?) in
            guard let current = s.channel else {
                s.drainScheduled = false
                s.outbox = []; s.outboxBytes = 0
                return ([], nil)
            }
            // The link reconnected meanwhile: the frames go out on the new channel, in order.
            if current !== channel { return ([], current) }
            s.drainScheduled = false
            defer { s.outbox = []; s.outboxBytes = 0 }
            return (s.outbox, nil)
        }
        if let moveTo { moveTo.eventLoop.execute { self.drain(moveTo) }; return }
        guard !frames.isEmpty else { return }
        for run in Self.coalesced(frames, allocator: channel.allocator) { channel.write(run, promise: nil) }
        channel.flush()
    }

    /// Bytes of small frames joined into one channel write. NIOSSL encrypts each write as its own
    /// TLS record (one `SSL_write`, one AEAD seal, 22 bytes of TLS 1.3 framing); a turn's acks,
    /// appends and results to one peer are a handful of small frames.
    static let coalesceBytes = 64 << 10

    /// `frames` in order, runs of small ones copied into one buffer each (at most `coalesceBytes`);
    /// a frame at least that large stays a write of its own.
    static func coalesced(_ frames: [ByteBuffer], allocator: ByteBufferAllocator) -> [ByteBuffer] {
        guard frames.count > 1 else { return frames }
        var out: [ByteBuffer] = []
        var run: ByteBuffer? = nil
        for frame in frames {
            if frame.readableBytes >= coalesceBytes {
                if let r = run { out.append(r); run = nil }
                out.append(frame)
                continue
            }
            if let r = run, r.readableBytes + frame.readableBytes > coalesceBytes {
                out.append(r)
                run = nil
            }
            if run == nil { run = allocator.buffer(capacity: min(coalesceBytes, frame.readableBytes * 4)) }
            var f = frame
            run!.writeBuffer(&f)
        }
        if let r = run { out.append(r) }
        return out
    }

    func close() {
        let ch = state.withLock { s -> (any Channel)? in
            s.closed = true
            s.queue.removeAll()
            s.outbox = []; s.outboxBytes = 0
            defer { s.channel = nil }
            return s.channel
        }
        ch?.close(promise: nil)
    }

    private func startDialIfDue(_ s: inout State) -> Bool {
        guard !s.connecting, !s.closed, NIODeadline.now() >= s.nextAttempt else { return false }
        s.connecting = true
        return true
    }

    private func dialNow() {
        let context = tls.clientContext, peer = self.peer, logger = self.logger, onNotice = self.onNotice
        let connect = ClientBootstrap(group: group)
            .connectTimeout(Self.connectTimeout)
            // tcpOption: IPPROTO_TCP. `.socketOption(.tcp_nodelay)` meant SOL_SOCKET + 1 = SO_DEBUG, which
            // only root may set: as any other user (the image, the systemd unit) every peer socket failed.
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelOption(.writeBufferWaterMark, value: .init(low: Self.writeBufferLow, high: Self.writeBufferHigh))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLClientHandler(context: context, serverHostname: nil))
                    try sync.addHandler(ByteToMessageHandler(PeerFrameDecoder()))
                    try sync.addHandler(PeerOutboundHandler(expected: peer, members: [peer], logger: logger, onNotice: onNotice))
                }
            }
            .connect(host: address.host, port: address.port)
        connect.flatMap { channel in
            channel.eventLoop.submit {
                let handler = try channel.pipeline.syncOperations.handler(type: PeerOutboundHandler.self)
                return handler.verified.futureResult.map { PeerTLS.level(negotiated: handler.negotiatedProtocol) }
            }.flatMap { $0 }.map { (channel, $0) }
        }.whenComplete { result in
            switch result {
            case .success(let (channel, level)): self.connected(channel, level: level)
            case .failure(let error): self.failed(error)
            }
        }
    }

    private func connected(_ channel: any Channel, level: Int) {
        let (pending, closed) = state.withLock { s -> (Bool, Bool) in
            s.connecting = false
            if s.closed { return (false, true) }
            // Frames a dead channel's drain had not written were admitted at its level: a peer
            // back at a lower one (gone back to an older release) may not decode them. Raft
            // sends again what is lost.
            if s.everConnected && level < s.level {
                s.dropped += UInt64(s.outbox.count)
                s.outbox = []
            }
            s.channel = channel
            s.level = level
            s.backoffMillis = backoffMin
            s.everConnected = true
            // Frames a dead channel's drain had not written yet, then the ones queued since:
            // both before anything sent from now on.
            s.outbox += s.queue.filter { $0.level <= level }.map(\.frame)
            s.outboxBytes = s.outbox.reduce(0) { $0 + $1.readableBytes }
            s.queue.removeAll()
            let schedule = !s.drainScheduled && !s.outbox.isEmpty
            if schedule { s.drainScheduled = true }
            return (schedule, false)
        }
        if closed { channel.close(promise: nil); return }
        logger.info("peer link up", metadata: ["peer": "\(peer)", "address": "\(address)"])
        if pending { channel.eventLoop.execute { self.drain(channel) } }
        channel.closeFuture.whenComplete { _ in
            let redial = self.state.withLock { s -> Bool in
                if let current = s.channel, current === channel { s.channel = nil }
                return !s.queue.isEmpty && self.startDialIfDue(&s)
            }
            self.logger.info("peer link down", metadata: ["peer": "\(self.peer)"])
            if redial { self.dialNow() }
        }
    }

    private func failed(_ error: any Error) {
        let (delay, log) = state.withLock { s -> (Int64?, Bool) in
            s.connecting = false
            let delay = s.backoffMillis
            s.nextAttempt = NIODeadline.now() + .milliseconds(delay)
            s.backoffMillis = min(s.backoffMillis * 2, backoffMax)
            // Retry on our own when frames are waiting; otherwise the next send dials.
            guard !s.closed, !s.queue.isEmpty, !s.retryScheduled else { return (nil, delay >= backoffMax) }
            s.retryScheduled = true
            return (delay, delay >= backoffMax)
        }
        // Peers being down is normal during restarts: say so loudly only once backoff is maxed.
        logger.log(level: log ? .warning : .debug, "peer link dial failed",
                   metadata: ["peer": "\(peer)", "address": "\(address)", "error": "\(error)"])
        if let delay {
            group.any().scheduleTask(in: .milliseconds(delay)) {
                let dial = self.state.withLock { s -> Bool in
                    s.retryScheduled = false
                    return !s.queue.isEmpty && self.startDialIfDue(&s)
                }
                if dial { self.dialNow() }
            }
        }
    }
}

/// Dialled connections: checks that the peer we reached is the member we meant to reach.
final class PeerOutboundHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let expected: NodeID
    let members: Set<NodeID>
    let logger: Logger
    let onNotice: @Sendable (PeerFrame, NodeID) -> Void
    var verified: EventLoopPromise<Void>!
    var done = false
    /// The certificate named the peer we dialled: only then is its notice believed.
    var identified = false
    /// The ALPN protocol the accepting side chose (nil: a build that offers none).
    var negotiatedProtocol: String?

    init(expected: NodeID, members: Set<NodeID>, logger: Logger,
         onNotice: @escaping @Sendable (PeerFrame, NodeID) -> Void = { _, _ in }) {
        self.expected = expected
        self.members = members
        self.logger = logger
        self.onNotice = onNotice
    }

    func handlerAdded(context: ChannelHandlerContext) {
        verified = context.eventLoop.makePromise(of: Void.self)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        finish(.failure(ChannelError.ioOnClosedChannel))
    }

    private func finish(_ result: Result<Void, any Error>) {
        guard !done else { return }
        done = true
        verified.completeWith(result)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tlsEvent = event as? TLSUserEvent, case .handshakeCompleted(let negotiated) = tlsEvent {
            negotiatedProtocol = negotiated
            var names: [String] = []
            if let cert = try? context.pipeline.syncOperations.nioSSL_peerCertificate() {
                names = (try? PeerTLS.names(of: cert)) ?? []
            }
            if PeerTLS.identify(names, members: members, expected: expected) != nil {
                identified = true
                finish(.success(()))
            } else {
                logger.warning("peer refused: its certificate does not name it",
                               metadata: ["peer": "\(expected)", "names": "\(names)"])
                finish(.failure(ClusterConfigError("peer certificate names \(names), expected \(expected)")))
                context.close(promise: nil)
                return
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(.failure(ChannelError.ioOnClosedChannel))
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // The accepting side writes only to refuse us: a `.notMember` notice, then it closes.
        guard identified else { return }
        guard case .notMember(let notice)? = try? PeerFrameCodec.decode(unwrapInboundIn(data)), notice.from == expected else {
            logger.warning("unexpected frame from the accepting side; closing", metadata: ["peer": "\(expected)"])
            context.close(promise: nil)
            return
        }
        logger.info("peer refused us: not a member", metadata: [
            "peer": "\(expected)", "configIndex": "\(notice.configIndex)", "voters": "\(notice.voters)"])
        onNotice(.notMember(notice), expected)
        context.close(promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(.failure(error))
        context.close(promise: nil)
    }
}
