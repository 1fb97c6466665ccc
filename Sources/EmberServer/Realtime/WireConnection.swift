import EmberCore
import EmberProtocol
import Logging
import NIOCore
import NIOHTTP1
import NIOWebSocket
import Synchronization

/// One WebSocket connection speaking the wire protocol (`ws://HOST:PORT/.ws?v=5&ns=NS`), as the
/// channel handler the upgrade installs. An idle connection is its socket, its pipeline, this
/// handler and its `RealtimeSession`: no Swift task waits per connection. Requests are handled in
/// arrival order by a task that runs only while some are queued; frames to the client go straight
/// to the socket through the session (`ConnectionOutbox`).
///
/// The rules are sans-IO machines this driver feeds: the WebSocket frames' (`WebSocketInbound`:
/// fragments, ping and pong, the close handshake), the request queue's (`WireRequestQueue`: order,
/// backpressure, teardown) and the wire session's (`RealtimeSession`, `RealtimeHandler`).
///
/// Threading: everything but `requests` is touched on the channel's event loop only; `requests`
/// is shared with the task handling them (under its lock). `started` is set on the loop before
/// any request task starts and never changes after.
final class WireConnection: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    /// Named limits of a connection's inbound side.
    enum Limits {
        /// Requests read and not yet handled; past it the socket is not read until half are
        /// handled (TCP backpressure on a client that sends faster than it is served).
        static let maxQueuedRequests = 64
        /// After the server's close frame, how long the client has to answer with its own
        /// before the socket is closed anyway.
        static let closeTimeout: TimeAmount = .seconds(10)
        /// Pipelined writes the event loop gathers from one read before handing them to the
        /// store together (each also holds one of the session's `maxPipelinedWrites` slots).
        static let maxBurstWrites = 128
    }

    private let channel: any Channel
    private let node: EmberNode
    private let services: RealtimeHandler.Services
    private let namespace: String
    /// The client's previous session (`ls`), ended before this one opens (`LastSession`).
    private var lastSession: String?
    private let host: String
    private let address: String?
    private let logger: Logger

    private struct Started {
        let session: RealtimeSession
        let handler: RealtimeHandler
    }
    private var started: Started?

    // Event-loop state.
    private var reassembler: WireReassembler
    private var inbound: WebSocketInbound<FrameBytes>
    private var pinger: RepeatedTask?
    private var holdsAddress = false
    /// Pipelined writes read since the last hand-off (`RealtimeHandler.inlineWrite`): they go to
    /// the store together at the end of the read, or before a message the task must handle.
    private var burst: [(tag: UInt64, request: WriteRequest)] = []

    /// A message as parsed on the event loop (the task does not parse it again).
    typealias Parsed = Result<WireClientMessage, WireClientMessage.ParseError>

    private let requests = Mutex(WireRequestQueue<Parsed>(maxQueued: Limits.maxQueuedRequests))

    init(channel: any Channel, head: HTTPRequestHead, node: EmberNode, services: RealtimeHandler.Services, logger: Logger) {
        self.channel = channel
        self.node = node
        self.services = services
        let target = WireConnectTarget(target: Self.target(of: head) ?? Substring("/.ws"), defaultNamespace: node.config.defaultNamespace)
        namespace = target.namespace
        lastSession = target.lastSession
        host = head.headers.first(name: "host") ?? "\(node.config.host):\(node.config.port)"
        address = ClientCredentials.address(of: channel)
        self.logger = logger
        reassembler = WireReassembler(maxMessageBytes: node.realtime.limits.session.maxMessageBytes)
        inbound = WebSocketInbound(maxMessageBytes: node.realtime.limits.session.maxMessageBytes)
    }

    /// The request target when it is the wire protocol's endpoint (`/.ws`, `/.ws?...`, `/.ws/...`).
    static func target(of head: HTTPRequestHead) -> Substring? {
        WireConnectTarget.endpoint(Substring(head.uri))
    }

    // MARK: - Opening

    func handlerAdded(context: ChannelHandlerContext) {
        let perAddress = services.policy.connectionsPerAddress
        guard perAddress.acquire(address) else {
            refuse(.policyViolation, reason: perAddress.refusal)
            return
        }
        holdsAddress = true
        guard node.config.clientTLS?.clientCAPath != nil else {
            open(base: .anonymous)
            return
        }
        // An admin client certificate makes the connection admin (read from the TLS handshake,
        // done by now); the task ends once it is read.
        let (channel, config) = (self.channel, node.config)
        Task {
            let base = await ClientCertificate.baseIdentity(of: channel, config: config)
            channel.eventLoop.execute { self.open(base: base) }
        }
    }

    private func open(base: Identity) {
        guard channel.isActive, !inbound.closing else { return }
        if let ls = lastSession {
            lastSession = nil
            if let old = node.realtime.session(namespace: namespace, id: ls) {
                // The previous session ends first; the hello follows once its teardown is done.
                let (loop, logger) = (channel.eventLoop, logger)
                Task {
                    let done = await old.endReplaced(maxWait: LastSession.maxWait)
                    logger.debug("ended the session a reconnecting client named (ls)",
                                 metadata: ["session": "\(ls)", "tornDown": "\(done)"])
                    loop.execute { self.open(base: base) }
                }
                return
            }
        }
        let id = Self.sessionID()
        guard let session = node.realtime.open(id: id, namespace: namespace, address: address, base: base) else {
            refuse(.unexpectedServerError, reason: "too many connections")
            return
        }
        // A new identity (another user, unauth, an expired token) may read less: listens it may
        // no longer read end with `c`. (The closures capture one shared object or this handler:
        // no allocation per connection for their contexts.)
        let services = self.services
        session.onIdentityChanged { session in RealtimeHandler.rejudgeListens(of: session, gate: services.gate, now: services.clock()) }
        let handler = RealtimeHandler(session: session, services: services,
                                      pipeline: WirePipeline(writer: services.store.writer, session: session))
        started = Started(session: session, handler: handler)
        session.attach(channel: channel) { self.channel.eventLoop.execute { self.sessionEnded() } }
        let nodes = services.config.operations.handshakeClientURLs(directory: services.store.admin.status.memberDirectory)
        session.send(WireMessages.hello(timestamp: services.clock(), host: host, session: id, nodes: nodes))
        let loop = channel.eventLoop
        // A peer that vanished without closing is found by its missing pong.
        let interval = TimeAmount.nanoseconds(Int64(node.realtime.limits.session.pingIntervalSeconds * 1e9))
        pinger = loop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in self.ping() }
        // Requests that arrived while the session opened.
        startHandlingIfQueued()
    }

    /// 15 random hex digits: unique enough for a connection, and short enough for Swift to keep
    /// inline in the string (no allocation per connection).
    static func sessionID() -> String {
        String(UInt64.random(in: 0..<(1 << 60)), radix: 16)
    }

    /// Closes before a session exists: the close frame with the reason, then the socket.
    private func refuse(_ code: WebSocketErrorCode, reason: String) {
        sendClose(code, reason: reason)
    }

    // MARK: - Reading

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch inbound.frame(Self.opcode(frame.opcode), fin: frame.fin, FrameBytes(buffer: frame.unmaskedData)) {
        case .none:
            break
        case .message(let whole):
            text(whole.buffer)
        case .pong(let data):
            channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .pong, data: data.buffer), promise: nil)
        case .answerClose(let data):
            // The client closes: answered with its code, then the socket closes.
            var data = data.buffer
            let code = data.readWebSocketErrorCode() ?? .normalClosure
            var reply = channel.allocator.buffer(capacity: 2)
            reply.write(webSocketErrorCode: code)
            let channel = self.channel
            channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .connectionClose, data: reply)).whenComplete { _ in
                channel.close(promise: nil)
            }
        case .closeSocket:
            channel.close(promise: nil)
        case .protocolError(let what):
            protocolError(what)
        case .tooLarge:
            tooLarge()
        }
    }

    static func opcode(_ opcode: WebSocketOpcode) -> WebSocketInbound<FrameBytes>.Opcode {
        switch opcode {
        case .text: .text
        case .binary: .binary
        case .continuation: .continuation
        case .ping: .ping
        case .pong: .pong
        case .connectionClose: .close
        default: .other
        }
    }

    private func text(_ buffer: ByteBuffer) {
        let out: WireReassembler.Output
        do { out = try reassembler.feed(String(buffer: buffer)) } catch {
            return tooLarge()
        }
        guard case .message(let message) = out else { return }
        let parsed = WireClientMessage.parse(message)
        // With nothing of the session queued or being handled (the task starts only from this
        // loop, so that stays true meanwhile), a pipelined write is handled right here: no task
        // hop per write and one hand-off to the store per read.
        if let handler = started?.handler, handler.pipeline != nil, requests.withLock({ $0.isIdle }) {
            switch handler.inlineWrite(parsed) {
            case .write(let tag, let request):
                burst.append((tag, request))
                if burst.count >= Limits.maxBurstWrites { flushBurst() }
                return
            case .answered:
                return
            case .notInline:
                break
            }
        }
        // The writes before it go first: the task's request must see them (and answer after them).
        flushBurst()
        let ready = started != nil
        let arrival = requests.withLock { $0.arrive(parsed, handlerReady: ready) }
        if arrival.pauseReading { channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in } }
        if arrival.startHandler { startTask() }
    }

    /// Hands the gathered writes to the store (their answers come back through the pipeline).
    private func flushBurst() {
        guard !burst.isEmpty else { return }
        let writes = burst
        burst = []  // no buffer kept: an idle connection holds none
        started?.handler.pipeline?.enqueue(burst: writes)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flushBurst()
        context.fireChannelReadComplete()
    }

    private func startHandlingIfQueued() {
        if requests.withLock({ $0.startIfQueued() }) { startTask() }
    }

    private func startTask() {
        guard let started else { return }
        Task { await self.handleQueued(started.handler) }
    }

    /// Handles queued requests one at a time until none is left; tears the connection down
    /// after the last one when the socket has closed meanwhile.
    private func handleQueued(_ handler: RealtimeHandler) async {
        while true {
            switch requests.withLock({ $0.next() }) {
            case .handle(let next, let resumeReading):
                if resumeReading {
                    let channel = self.channel
                    channel.eventLoop.execute { channel.setOption(ChannelOptions.autoRead, value: true).whenFailure { _ in } }
                }
                await handler.handle(parsed: next)
            case .stop(let tearDown):
                if tearDown { await tearDownSession() }
                return
            }
        }
    }

    private func tooLarge() {
        if let session = started?.session {
            session.finish(reason: "message too large")
        } else {
            sendClose(.messageTooLarge, reason: "message too large")
        }
    }

    private func protocolError(_ what: String) {
        if let session = started?.session {
            session.finish(reason: "protocol error: \(what)")
        } else {
            sendClose(.protocolError, reason: what)
        }
    }

    // MARK: - Liveness

    /// Every `Limits.pingIntervalSeconds` of the session: the previous ping must have been answered.
    private func ping() {
        switch inbound.pingDue() {
        case .none:
            return
        case .timeout:
            started?.session.finish(reason: "ping timeout")
            channel.close(promise: nil)
            return
        case .ping:
            break
        }
        var data = channel.allocator.buffer(capacity: 8)
        data.writeInteger(UInt64.random(in: 0...UInt64.max))
        channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .ping, data: data), promise: nil)
    }

    // MARK: - Closing

    /// The session ended on the server's side (a limit, shutdown, a bad message): what it still
    /// has queued goes out, then the close frame with the reason. A connection cut off as a slow
    /// consumer is already closed; only the log says why.
    private func sessionEnded() {
        guard let session = started?.session, channel.isActive, !inbound.closing else { return }
        let reason = session.closeReason ?? "closed"
        if reason.contains("slow consumer") {
            logger.warning("websocket cut off", metadata: ["reason": "\(reason)", "session": "\(session.id)"])
            return
        }
        session.flushPendingNow()
        sendClose(.normalClosure, reason: reason)
    }

    private func sendClose(_ code: WebSocketErrorCode, reason: String) {
        guard channel.isActive, inbound.beginClose() else { return }
        pinger?.cancel()
        pinger = nil
        let text = String(reason.prefix(120))
        var data = channel.allocator.buffer(capacity: 2 + text.utf8.count)
        data.write(webSocketErrorCode: code)
        data.writeString(text)
        channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .connectionClose, data: data), promise: nil)
        let channel = self.channel
        channel.eventLoop.scheduleTask(in: Limits.closeTimeout) { channel.close(promise: nil) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("websocket error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        // Writes read before the close are queued like the rest (the teardown waits for them).
        flushBurst()
        pinger?.cancel()
        pinger = nil
        guard let started else {
            if holdsAddress { services.policy.connectionsPerAddress.release(address) }
            holdsAddress = false
            context.fireChannelInactive()
            return
        }
        started.session.finish(reason: started.session.closeReason)
        if requests.withLock({ $0.socketClosed() }) { Task { await self.tearDownSession() } }
        context.fireChannelInactive()
    }

    /// After the socket closed and the last request was handled: the session leaves the hub,
    /// queued writes are answered (they are ordered before the onDisconnect run anyway, one
    /// queue; waiting keeps their outcomes from racing it), then the session's onDisconnect
    /// writes run through the log, each as the user who registered it (a node that dies first
    /// leaves them to the leader: OnDisconnectKeeper).
    private func tearDownSession() async {
        guard let started else { return }
        let session = started.session
        node.realtime.close(session)
        await started.handler.pipeline?.drained()
        await node.onDisconnect.ended(session)
        if holdsAddress { services.policy.connectionsPerAddress.release(address) }
        session.tornDown.open()
    }
}

/// A frame's payload as the WebSocket rules see it (`WebSocketInbound`).
struct FrameBytes: WebSocketPayload {
    var buffer: ByteBuffer
    var byteCount: Int { buffer.readableBytes }
    mutating func append(_ other: FrameBytes) {
        var part = other.buffer
        buffer.writeBuffer(&part)
    }
}
