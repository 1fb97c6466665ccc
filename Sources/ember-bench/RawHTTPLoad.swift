import ArgumentParser
import Foundation
import NIOCore
import NIOPosix

/// One request of a raw load: what varies per write (the connection adds `Host` and framing).
struct RawHTTPRequest: Sendable {
    var method: StaticString
    /// Path and query, e.g. `/bench/w3/k7.json?print=silent`.
    var target: String
    var body: String
    /// Send `Content-Type: application/json`.
    var json = false
    /// An `Accept` header (the probe's event stream), if any.
    var accept: String? = nil

    /// The request's bytes: request line, `Host`, optional `Content-Type`, `Content-Length`, body.
    func write(host: String, into out: inout ByteBuffer) {
        out.writeStaticString(method)
        out.writeStaticString(" ")
        out.writeString(target)
        out.writeStaticString(" HTTP/1.1\r\nHost: ")
        out.writeString(host)
        if json { out.writeStaticString("\r\nContent-Type: application/json") }
        if let accept {
            out.writeStaticString("\r\nAccept: ")
            out.writeString(accept)
        }
        out.writeStaticString("\r\nContent-Length: ")
        out.writeString(String(body.utf8.count))
        out.writeStaticString("\r\n\r\n")
        out.writeString(body)
    }
}

/// Closed-loop HTTP/1.1 keep-alive load on raw NIO channels: N connections, each with exactly one
/// request outstanding, the next sent when the previous answer has been read completely. It
/// replaces AsyncHTTPClient in the measured loads (a task and several allocations per request
/// cost ~150 µs of CPU per write on the 2-core bench box, more than the server measured): here a
/// write is a buffer built and written from the channel's event loop and an incremental parse
/// of the answer, with no task or continuation per request. Ember and etcd get the same driver.
///
/// Same rules as before: a write counts when answered 2xx; latency is send → complete answer, for
/// writes sent after the 1 s warm-up and answered before the end. A non-2xx answer is an error on
/// a connection that goes on; an unparseable answer, a refused connect or a connection lost with a
/// write outstanding is an error and the connection is re-opened (giving up after
/// `maxConsecutiveFailures` in a row).
struct RawHTTPLoad {
    /// Connection c talks to `bases[c % bases.count]` (`http://host:port`).
    let bases: [String]
    let clients: Int
    let duration: Double

    static let warmup = 1.0
    /// Failures in a row (no 2xx in between) after which a connection stops.
    static let maxConsecutiveFailures = 20
    /// Pause before re-opening after a failure (a restarting server is not hammered).
    static let reconnectDelay = TimeAmount.milliseconds(20)
    /// How long after the run's end a connection waits for its last answer.
    static let drainTimeout = TimeAmount.seconds(30)

    init(bases: [String], clients: Int, duration: Double) {
        precondition(!bases.isEmpty, "at least one server")
        precondition(clients >= 1, "at least one connection")
        self.bases = bases
        self.clients = clients
        self.duration = duration
    }

    /// Runs the load and summarises it as the other loads do.
    func run(name: String, request: @escaping @Sendable (_ worker: Int, _ i: Int) -> RawHTTPRequest) async throws -> HTTPLoad.Result {
        let outcomes = try await runConnections(request: request)
        if let e = outcomes.lazy.compactMap(\.firstError).first { print("  \(name): first error: \(e)") }
        let reconnects = outcomes.map(\.reconnects).reduce(0, +)
        if reconnects > 0 { print("  \(name): \(reconnects) connections re-opened") }
        return HTTPLoad.Result(name: name, outcomes: outcomes, seconds: duration)
    }

    /// Runs the load; one outcome per connection, in connection order.
    func runConnections(request: @escaping @Sendable (Int, Int) -> RawHTTPRequest) async throws -> [LoadOutcome] {
        let endpoints = try bases.map { base -> (host: String, port: Int) in
            guard let u = URL(string: base), u.scheme == "http", let host = u.host, let port = u.port else {
                throw ValidationError("bad server URL \(base) (http://host:port)")
            }
            return (host, port)
        }
        let timing = LoadTiming(warmup: Self.warmup, duration: duration)
        // System.coreCount loops (shared with AsyncHTTPClient's setup calls); connections round-robin.
        let group = MultiThreadedEventLoopGroup.singleton
        var futures: [EventLoopFuture<LoadOutcome>] = []
        for w in 0..<clients {
            let (host, port) = endpoints[w % endpoints.count]
            let loop = group.next()
            let connection = RawLoadConnection(worker: w, host: host, port: port, loop: loop, timing: timing, request: request)
            futures.append(connection.done.futureResult)
            loop.execute { connection.start() }
        }
        var outcomes: [LoadOutcome] = []
        for f in futures { outcomes.append(try await f.get()) }
        return outcomes
    }
}

/// One client of a `RawHTTPLoad`: its counters and the channel it currently uses, re-opened after
/// a failure. Every method runs on `loop` (the channel's loop too).
final class RawLoadConnection: @unchecked Sendable {
    let worker: Int
    let host: String
    let port: Int
    let hostHeader: String
    let loop: any EventLoop
    let timing: LoadTiming
    let request: @Sendable (Int, Int) -> RawHTTPRequest
    let done: EventLoopPromise<LoadOutcome>

    private var outcome = LoadOutcome()
    private var next = 0
    /// When the outstanding request was sent; nil when none is.
    private var sentAt: NIODeadline?
    private var channel: (any Channel)?
    private var failuresInARow = 0
    private var finished = false
    private var opened = false
    private var drainDeadline: Scheduled<Void>?

    init(worker: Int, host: String, port: Int, loop: any EventLoop, timing: LoadTiming,
         request: @escaping @Sendable (Int, Int) -> RawHTTPRequest) {
        self.worker = worker
        self.host = host
        self.port = port
        self.hostHeader = "\(host):\(port)"
        self.loop = loop
        self.timing = timing
        self.request = request
        self.done = loop.makePromise(of: LoadOutcome.self)
    }

    func start() {
        loop.assertInEventLoop()
        drainDeadline = loop.scheduleTask(deadline: timing.end + RawHTTPLoad.drainTimeout) { [self] in
            guard !finished else { return }
            if sentAt != nil { failed("no answer within \(RawHTTPLoad.drainTimeout) of the run's end") }
            finish()
        }
        connect()
    }

    private func connect() {
        guard !finished else { return }
        guard NIODeadline.now() < timing.end else { return finish() }
        if opened { outcome.reconnects += 1 }
        opened = true
        ClientBootstrap(group: loop)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { [self] ch in
                ch.eventLoop.makeCompletedFuture { try ch.pipeline.syncOperations.addHandler(RawLoadHandler(self)) }
            }
            .connect(host: host, port: port)
            .whenFailure { [self] error in
                guard !finished else { return }
                // Counts as the write it would have carried.
                failed("connect to \(hostHeader): \(error)")
                retry()
            }
    }

    /// The channel is up: send the first request.
    func active(_ context: ChannelHandlerContext) {
        loop.assertInEventLoop()
        guard !finished else { return context.close(promise: nil) }
        channel = context.channel
        sendNext(context)
    }

    private func sendNext(_ context: ChannelHandlerContext) {
        let now = NIODeadline.now()
        guard now < timing.end else { return finish() }
        assert(sentAt == nil, "one request outstanding per connection")
        var out = context.channel.allocator.buffer(capacity: 256)
        request(worker, next).write(host: hostHeader, into: &out)
        next += 1
        sentAt = now
        context.writeAndFlush(NIOAny(out), promise: nil)
    }

    /// A complete answer; false when this channel is done with (already reported, or the run is over).
    func answered(_ context: ChannelHandlerContext, _ response: RawHTTPResponseReader.Response) -> Bool {
        guard let sent = sentAt else {
            failed("an answer with no request outstanding (HTTP \(response.status))")
            lost("unsolicited answer")
            return false
        }
        sentAt = nil
        let now = NIODeadline.now()
        if (200..<300).contains(response.status) {
            outcome.ok += 1
            failuresInARow = 0
            if sent >= timing.measureFrom && now <= timing.end {
                outcome.latencies.append(Double((now - sent).nanoseconds) / 1e6)
            }
        } else {
            // The server answered: an error, but the connection goes on.
            outcome.errors += 1
            if outcome.firstError == nil { outcome.firstError = "HTTP \(response.status) \(response.bodyPrefix)" }
        }
        if response.close {
            // The server closes after this answer: re-open, not an error.
            lost("closed after an answer")
            return false
        }
        sendNext(context)
        return !finished
    }

    /// The channel is gone or unusable (reported once per channel by its handler).
    func lost(_ reason: String) {
        loop.assertInEventLoop()
        channel = nil
        guard !finished else { return }
        if sentAt != nil { failed(reason) }
        retry()
    }

    /// Counts a failed write (the outstanding one, or the one a refused connect would have carried).
    private func failed(_ reason: String) {
        sentAt = nil
        outcome.errors += 1
        failuresInARow += 1
        if outcome.firstError == nil { outcome.firstError = reason }
    }

    private func retry() {
        guard !finished else { return }
        guard failuresInARow < RawHTTPLoad.maxConsecutiveFailures else {
            if outcome.firstError != nil { outcome.firstError! += " (connection \(worker) gave up after \(failuresInARow) failures in a row)" }
            return finish()
        }
        if failuresInARow == 0 {
            connect()
        } else {
            loop.scheduleTask(in: RawHTTPLoad.reconnectDelay) { [self] in connect() }
        }
    }

    private func finish() {
        guard !finished else { return }
        finished = true
        drainDeadline?.cancel()
        channel?.close(promise: nil)
        channel = nil
        done.succeed(outcome)
    }
}

/// The pipeline end of one `RawLoadConnection` channel: reads answers, reports the channel's end
/// once (bad answer, error or close, whichever comes first).
final class RawLoadHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let connection: RawLoadConnection
    private var reader = RawHTTPResponseReader()
    private var buffer: ByteBuffer?
    private var ended = false

    init(_ connection: RawLoadConnection) {
        self.connection = connection
    }

    func channelActive(context: ChannelHandlerContext) {
        connection.active(context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !ended else { return }
        var incoming = unwrapInboundIn(data)
        // Most reads hold one whole answer: parse them in place, copy only a partial answer's rest.
        if var b = buffer {
            buffer = nil  // b is then the only reference: appended to in place
            b.writeBuffer(&incoming)
            incoming = b
        }
        do {
            while let response = try reader.next(&incoming) {
                guard connection.answered(context, response) else {
                    // The connection has moved on (re-opening, or the run is over).
                    ended = true
                    context.close(promise: nil)
                    return
                }
            }
        } catch {
            end(context, "unparseable answer: \(error)")
            return
        }
        if incoming.readableBytes > 0 {
            incoming.discardReadBytes()
            buffer = incoming
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        end(context, "connection error: \(error)")
    }

    func channelInactive(context: ChannelHandlerContext) {
        end(context, "connection closed by the server")
    }

    private func end(_ context: ChannelHandlerContext, _ reason: String) {
        guard !ended else { return }
        ended = true
        connection.lost(reason)
        context.close(promise: nil)
    }
}
