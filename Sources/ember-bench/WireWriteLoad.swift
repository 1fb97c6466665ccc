import ArgumentParser
import EmberProtocol
import Foundation
import NIOCore
import NIOPosix

/// Pipelined durable writes over the Firebase wire protocol v5, the way SDKs send them: N
/// WebSocket connections, each keeping K `p` (set) requests outstanding and sending the next as
/// each response arrives. A write counts when its response says `ok`, which the server sends only
/// after the write's commit is durable. Responses must come back in request order (checked).
///
/// The client is a minimal WebSocket implementation on NIO (handshake, unmasked server frames,
/// client frames with an all-zero mask key), so the load generator spends little of the 2 shared
/// cores: requests made while reading one socket read are written with one flush.
struct WireWriteLoad {
    /// Connection c talks to `urls[c % urls.count]` (a cluster's nodes, or one node).
    let urls: [String]
    let connections: Int
    let pipeline: Int
    let duration: Double
    let valueSize: Int
    let inserts: Bool
    /// 0: every write goes below `/bench`; n > 0: write r goes below `/p<r % n>` (the trigger
    /// bench's triggers on n different patterns, each write matching one of them).
    let spread: Int

    init(urls: [String], connections: Int, pipeline: Int, duration: Double, valueSize: Int, inserts: Bool, spread: Int = 0) {
        precondition(!urls.isEmpty, "at least one URL")
        precondition(spread >= 0, "spread is a count of top-level keys")
        self.urls = urls
        self.connections = connections
        self.pipeline = pipeline
        self.duration = duration
        self.valueSize = valueSize
        self.inserts = inserts
        self.spread = spread
    }

    init(url: String, connections: Int, pipeline: Int, duration: Double, valueSize: Int, inserts: Bool, spread: Int = 0) {
        self.init(urls: [url], connections: connections, pipeline: pipeline, duration: duration, valueSize: valueSize, inserts: inserts,
                  spread: spread)
    }

    func run(name: String) async throws -> HTTPLoad.Result {
        var endpoints: [(host: String, port: Int, target: String)] = []
        for url in urls {
            guard let u = URL(string: url), let host = u.host, let port = u.port else { throw ValidationError("bad URL \(url)") }
            var target = u.path
            if let q = u.query { target += "?" + q }
            endpoints.append((host, port, target))
        }
        let timing = LoadTiming(warmup: 1, duration: duration)
        let group = MultiThreadedEventLoopGroup.singleton
        var futures: [EventLoopFuture<LoadOutcome>] = []
        for c in 0..<connections {
            let (host, port, target) = endpoints[c % endpoints.count]
            let loop = group.next()
            let promise = loop.makePromise(of: LoadOutcome.self)
            let handler = WireLoadHandler(host: "\(host):\(port)", target: target, connection: c, pipeline: pipeline,
                                          valueSize: valueSize, inserts: inserts, spread: spread, timing: timing, done: promise)
            let connect = ClientBootstrap(group: loop)
                .channelOption(.tcpOption(.tcp_nodelay), value: 1)
                .channelInitializer { ch in ch.eventLoop.makeCompletedFuture { try ch.pipeline.syncOperations.addHandler(handler) } }
                .connect(host: host, port: port)
            connect.whenFailure { promise.fail($0) }
            // A connection that never finishes (server gone) fails after the run plus 30 s.
            loop.scheduleTask(deadline: timing.end + .seconds(30)) { promise.fail(ValidationError("connection \(c) did not finish")) }
            futures.append(promise.futureResult.always { _ in connect.whenSuccess { $0.close(promise: nil) } })
        }
        var outcomes: [LoadOutcome] = []
        var failed = 0
        for f in futures {
            do { outcomes.append(try await f.get()) } catch {
                print("  connection failed: \(error)")
                failed += 1
            }
        }
        if let e = outcomes.lazy.compactMap(\.firstError).first { print("  \(name): first refused write's answer: \(e)") }
        return HTTPLoad.Result(name: name, outcomes: outcomes, failedConnections: failed, seconds: duration)
    }
}

/// One connection's load; every method runs on the channel's event loop.
final class WireLoadHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let host: String
    let target: String
    let connection: Int
    let pipeline: Int
    let valueSize: Int
    let inserts: Bool
    let spread: Int
    let timing: LoadTiming
    let done: EventLoopPromise<LoadOutcome>

    private var handshaken = false
    private var started = false
    private var finished = false
    private var buffer = ByteBuffer()
    private var nextR: Int64 = 1
    /// Requests in flight, oldest first: (r, send time).
    private var inflight = CircularBuffer<(Int64, NIODeadline)>()
    private var outcome = LoadOutcome()
    private var needsFlush = false

    init(host: String, target: String, connection: Int, pipeline: Int, valueSize: Int, inserts: Bool, spread: Int = 0,
         timing: LoadTiming, done: EventLoopPromise<LoadOutcome>) {
        self.host = host
        self.target = target
        self.connection = connection
        self.pipeline = pipeline
        self.valueSize = valueSize
        self.inserts = inserts
        self.spread = spread
        self.timing = timing
        self.done = done
    }

    func channelActive(context: ChannelHandlerContext) {
        let request = WebSocketUpgrade.request(host: host, target: target)
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: request)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var incoming = unwrapInboundIn(data)
        buffer.writeBuffer(&incoming)
        if !handshaken {
            let text = String(buffer: buffer)
            guard let end = text.utf8.firstRange(of: Array("\r\n\r\n".utf8)) else { return }
            let headBytes = text.utf8.distance(from: text.utf8.startIndex, to: end.upperBound)
            guard WebSocketUpgrade.accepted(text) else {
                fail(context, "upgrade refused: \(text.prefix(80))")
                return
            }
            buffer.moveReaderIndex(forwardBy: headBytes)
            handshaken = true
        }
        while let (opcode, payload) = nextFrame() {
            switch opcode {
            case 0x1: handle(context, payload)
            case 0x8:
                fail(context, "server closed the connection")
                return
            case 0x9: send(context, opcode: 0xA, payload)  // ping -> pong
            default: break
            }
            if finished { return }
        }
        buffer.discardReadBytes()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if needsFlush {
            needsFlush = false
            context.flush()
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(context, "\(error)")
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(context, "connection closed")
    }

    /// The next complete frame (server frames are unmasked).
    private func nextFrame() -> (UInt8, ByteBuffer)? {
        guard let header = WebSocketFrameHeader(buffer.readableBytesView),
              UInt64(buffer.readableBytes - header.length) >= header.payloadLength else { return nil }
        buffer.moveReaderIndex(forwardBy: header.length)
        let payload = buffer.readSlice(length: Int(header.payloadLength))!
        return (header.opcode, payload)
    }

    private func handle(_ context: ChannelHandlerContext, _ payload: ByteBuffer) {
        if !started {
            // The server's hello (`{"t":"c",...}`): start the pipeline.
            started = true
            for _ in 0..<pipeline { sendWrite(context) }
            return
        }
        let (number, ok) = Self.scan(payload)
        guard let r = number else { return }  // a push or control message
        let now = NIODeadline.now()
        guard let (expected, sent) = inflight.popFirst(), expected == r else {
            outcome.errors += 1
            fail(context, "response \(r) out of order")
            return
        }
        if ok {
            outcome.ok += 1
            if sent >= timing.measureFrom && now <= timing.end {
                outcome.latencies.append(Double((now - sent).nanoseconds) / 1e6)
            }
        } else {
            outcome.errors += 1
            if outcome.firstError == nil { outcome.firstError = String(buffer: payload.getSlice(at: payload.readerIndex, length: min(300, payload.readableBytes))!) }
        }
        if now < timing.end {
            sendWrite(context)
        } else if inflight.isEmpty {
            finished = true
            done.succeed(outcome)
            context.close(promise: nil)
        }
    }

    private func sendWrite(_ context: ChannelHandlerContext) {
        let r = nextR
        nextR += 1
        let text = #"{"t":"d","d":{"r":"# + String(r) + #","a":"p","b":{"p":""# + (spread > 0 ? "p" + String(Int(r) % spread) : "bench") + "/w" + String(connection) + "/"
            + benchKey(Int(r), inserts: inserts) + #"","d":""# + benchValue(Int(r), size: valueSize) + #""}}}"#
        inflight.append((r, .now()))
        send(context, opcode: 0x1, context.channel.allocator.buffer(string: text))
    }

    /// A client frame: FIN, `opcode`, masked with the all-zero key (the payload is unchanged).
    private func send(_ context: ChannelHandlerContext, opcode: UInt8, _ payload: ByteBuffer) {
        var frame = context.channel.allocator.buffer(capacity: payload.readableBytes + 14)
        frame.writeBytes(WebSocketClientFrame.header(opcode: opcode, payloadLength: payload.readableBytes))
        var p = payload
        frame.writeBuffer(&p)
        context.write(wrapOutboundOut(frame), promise: nil)
        needsFlush = true
    }

    private func fail(_ context: ChannelHandlerContext, _ reason: String) {
        guard !finished else { return }
        finished = true
        done.fail(ValidationError("connection \(connection): \(reason)"))
        context.close(promise: nil)
    }

    /// The integer after the first `"r":` (responses carry the request number there; nil for
    /// pushes), and whether the message holds `"s":"ok"`.
    static func scan(_ payload: ByteBuffer) -> (r: Int64?, ok: Bool) {
        payload.withUnsafeReadableBytes { b in
            func find(_ pattern: StaticString, from: Int = 0) -> Int? {
                let n = pattern.utf8CodeUnitCount
                let p = pattern.utf8Start
                guard b.count >= n else { return nil }
                var i = from
                while i + n <= b.count {
                    if b[i] == p[0] {
                        var j = 1
                        while j < n && b[i + j] == p[j] { j += 1 }
                        if j == n { return i + n }
                    }
                    i += 1
                }
                return nil
            }
            var r: Int64?
            if var i = find(#""r":"#) {
                var v: Int64 = 0
                let from = i
                while i < b.count, b[i] >= 0x30, b[i] <= 0x39 {
                    v = v * 10 + Int64(b[i] - 0x30)
                    i += 1
                }
                if i > from { r = v }
            }
            return (r, r != nil && find(#""s":"ok""#) != nil)
        }
    }
}
