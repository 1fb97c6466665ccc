import EmberCore
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// One delivery lane's kept-alive HTTP/1.1 connection to its receiver, on which the lane's
/// window of POSTs is pipelined: requests go out in the order `post` is called and HTTP/1.1
/// answers them in that order, so a window reaches the receiver in log order (separate
/// connections would let a later POST overtake an earlier one).
///
/// Pipelining starts only once the receiver showed it keeps the connection alive (an HTTP/1.1
/// answer without `Connection: close`); until then one request at a time. Requests written
/// behind an answer that closes the connection were not processed by the receiver: they go out
/// again, first, on the next connection. A timeout, a lost connection or a bad answer fails
/// every request written on the connection (their outcome is unknown: the lane retries them,
/// same ids); requests not yet written wait for the next connection. A connect error fails
/// them all.
///
/// All state lives on one event loop (`loop`); `post` and `close` hop onto it.
final class TriggerPipe: @unchecked Sendable {
    struct Request {
        var head: HTTPRequestHead
        var body: ByteBuffer
        var promise: EventLoopPromise<Int>
        var deadline: NIODeadline
    }

    let url: TriggerURL
    let timeout: TimeAmount
    let loop: any EventLoop
    private let tls: NIOSSLContext?
    /// The headers every request carries (`Host`, `User-Agent`): made once, not per POST.
    private let baseHeaders: HTTPHeaders
    // Confined to `loop`.
    private var pending = CircularBuffer<Request>()
    private var written = CircularBuffer<Request>()
    private var channel: (any Channel)?
    private var connecting = false
    /// The receiver answered on this connection with keep-alive: pipelining is safe.
    private var keepsAlive = false
    private var timer: Scheduled<Void>?
    /// The deadline `timer` is armed for: kept while the oldest request's stays the same (a
    /// timer scheduled and cancelled per POST and per answer was a share of the pipe's cost).
    private var timerDeadline: NIODeadline?
    private var closed = false

    /// Named limit: requests waiting or written at once (a lane's window is at most 64).
    static let maxQueued = 256

    init(url: TriggerURL, timeoutMs: Int) throws {
        self.url = url
        self.timeout = .milliseconds(Int64(timeoutMs))
        self.loop = MultiThreadedEventLoopGroup.singleton.next()
        self.tls = try url.tls ? NIOSSLContext(configuration: .makeClientConfiguration()) : nil
        let host = url.host.contains(":") ? "[\(url.host)]" : url.host
        self.baseHeaders = [
            "Host": (url.tls ? url.port == 443 : url.port == 80) ? host : "\(host):\(url.port)",
            "User-Agent": "ember-triggers",
        ]
    }

    /// POSTs `body`; the answer's status (any), or an error when there was none.
    func post(body: ByteBuffer, headers: [(String, String)]) -> EventLoopFuture<Int> {
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: url.target, headers: baseHeaders)
        head.headers.add(name: "Content-Length", value: String(body.readableBytes))
        for (k, v) in headers { head.headers.add(name: k, value: v) }
        let promise = loop.makePromise(of: Int.self)
        let request = Request(head: head, body: body, promise: promise, deadline: .now() + timeout)
        loop.execute { [self] in
            guard !closed else { return promise.fail(TriggerPipeError("delivery stopped")) }
            guard pending.count + written.count < Self.maxQueued else { return promise.fail(TriggerPipeError("too many requests queued")) }
            pending.append(request)
            pump()
        }
        return promise.futureResult
    }

    /// Ends the connection; what is queued fails.
    func close() {
        loop.execute { [self] in
            closed = true
            failAll(TriggerPipeError("delivery stopped"))
        }
    }

    // MARK: - On the loop

    private func pump() {
        loop.assertInEventLoop()
        armTimer()
        guard !pending.isEmpty else { return }
        guard let channel else {
            if !connecting { connect() }
            return
        }
        while let next = pending.first, written.isEmpty || keepsAlive {
            pending.removeFirst()
            written.append(next)
            channel.write(HTTPClientRequestPart.head(next.head), promise: nil)
            channel.write(HTTPClientRequestPart.body(.byteBuffer(next.body)), promise: nil)
            channel.write(HTTPClientRequestPart.end(nil), promise: nil)
        }
        channel.flush()
    }

    private func connect() {
        connecting = true
        keepsAlive = false
        let (tls, host) = (self.tls, url.host)
        let sni = host.contains(":") || host.allSatisfy({ $0.isNumber || $0 == "." }) ? nil : host
        let bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(timeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    let ops = channel.pipeline.syncOperations
                    if let tls { try ops.addHandler(NIOSSLClientHandler(context: tls, serverHostname: sni)) }
                    try ops.addHTTPClientHandlers()
                    try ops.addHandler(TriggerPipeHandler(pipe: self))
                }
            }
        bootstrap.connect(host: host, port: url.port).hop(to: loop).whenComplete { [self] result in
            connecting = false
            switch result {
            case .success(let c):
                if closed { c.close(promise: nil); return }
                channel = c
                pump()
            case .failure(let error):
                // Nothing was sent: everything waiting fails with the reason (the lane backs off).
                let why = TriggerPipeError("connect: \(error)")
                while let r = pending.popFirst() { r.promise.fail(why) }
                armTimer()
            }
        }
    }

    /// An answer's end for the oldest written request.
    fileprivate func answered(_ status: Int, keepAlive: Bool, on c: any Channel) {
        guard c === channel, let r = written.popFirst() else { return fail(TriggerPipeError("an answer without a request"), on: c) }
        r.promise.succeed(status)
        if keepAlive {
            keepsAlive = true
            pump()
            return
        }
        // The receiver closes after this answer: what was written behind it was not processed;
        // it goes out first on the next connection.
        while let w = written.popLast() { pending.prepend(w) }
        channel = nil
        c.close(promise: nil)
        pump()
    }

    /// The connection failed or closed: requests written on it fail (their outcome is
    /// unknown), the others wait for the next connection.
    fileprivate func fail(_ error: any Error, on c: any Channel) {
        guard c === channel else { return }
        channel = nil
        c.close(promise: nil)
        while let w = written.popFirst() { w.promise.fail(error) }
        pump()
    }

    private func failAll(_ error: any Error) {
        if let c = channel { channel = nil; c.close(promise: nil) }
        while let w = written.popFirst() { w.promise.fail(error) }
        while let r = pending.popFirst() { r.promise.fail(error) }
        timer?.cancel()
        timer = nil
        timerDeadline = nil
    }

    /// One timer for the oldest deadline: a request past it fails, and with it the connection
    /// when it was written (later answers could not be matched to their requests).
    private func armTimer() {
        let (w, p) = (written.first?.deadline, pending.first?.deadline)
        let oldest = w.map { w in p.map { min(w, $0) } ?? w } ?? p
        if timer != nil && oldest == timerDeadline { return }
        timer?.cancel()
        timer = nil
        timerDeadline = oldest
        guard let oldest else { return }
        timer = loop.scheduleTask(deadline: oldest) { [self] in
            timer = nil
            timerDeadline = nil
            let now = NIODeadline.now()
            let why = TriggerPipeError("timeout after \(timeout.nanoseconds / 1_000_000) ms")
            if let w = written.first, w.deadline <= now, let c = channel {
                fail(why, on: c)
            }
            while let r = pending.first, r.deadline <= now {
                pending.removeFirst()
                r.promise.fail(why)
            }
            armTimer()
        }
    }
}

struct TriggerPipeError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// Reads the answers of a `TriggerPipe`'s connection (bodies are discarded).
private final class TriggerPipeHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    let pipe: TriggerPipe
    private var head: HTTPResponseHead?

    init(pipe: TriggerPipe) { self.pipe = pipe }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            // An interim answer (1xx) is not the request's answer.
            head = h.status.code < 200 ? nil : h
        case .body:
            break
        case .end:
            guard let h = head else { return }
            head = nil
            pipe.answered(Int(h.status.code), keepAlive: h.isKeepAlive, on: context.channel)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        pipe.fail(TriggerPipeError("connection closed"), on: context.channel)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        pipe.fail(error, on: context.channel)
    }
}
