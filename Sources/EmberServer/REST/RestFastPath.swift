import EmberCore
import EmberProtocol
import Foundation
import HTTPTypes
import HummingbirdCore
import NIOCore
import NIOHTTPTypes
import Synchronization

/// REST data writes served on the connection's event loop, without a task, a continuation, an
/// NIOAsyncChannel hand-off or a Hummingbird request per write (docs/benchmarks-history.md "REST writes": those
/// were two thirds of a small write's CPU). It sits in each HTTP/1 connection's pipeline right
/// after the HTTP part decoding; a write it takes goes to the store's pipelined writer, and the
/// answer is written back on the loop once the write is durable (and applied on this node).
///
/// It takes only plain writes: `PUT`/`PATCH`/`POST`/`DELETE` of a data path with a body of at
/// most `maxBodyBytes` announced by `Content-Length`, with no `If-Match`, `X-Firebase-ETag`,
/// method override, `Expect`, `Transfer-Encoding` or `Connection` other than keep-alive, and
/// no query, shallow or export parameter. Everything else — reads, streams, priorities, rules,
/// operations endpoints, every request while one is with Hummingbird — passes to Hummingbird
/// untouched. What it takes it judges with the same code as the Hummingbird path
/// (`RestHandler.prepareWrite`, the `ClientPolicy`, `RestAnswer`), so answers are
/// the same byte for byte (test_rest_fast_path.py compares them).
///
/// Order: HTTP/1.1 answers leave in request order. Writes taken here are answered in order; a
/// request for Hummingbird that arrives while some are unanswered waits (with everything after
/// it) until they are; and nothing is taken here while a request is with Hummingbird.
///
/// Not used when client certificates can make a request admin (`--tls-ca`): that identity is
/// read asynchronously from the TLS handshake.
final class RestFastPath: ChannelDuplexHandler, RemovableChannelHandler, WriteOutcomeSink, @unchecked Sendable {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// Largest body taken here (larger writes go to Hummingbird, which applies the node's limit).
    static let maxBodyBytes = RawWriteHead.maxBodyBytes
    /// Requests held behind unanswered writes before the connection stops being read.
    static let maxHeldParts = 256

    let rest: RestHandler
    let metrics: NodeMetrics

    // Event loop only (`@unchecked Sendable`: `completed` hops onto the loop first).
    private var eventLoop: (any EventLoop)?
    private var context: ChannelHandlerContext?
    /// The write being read (head seen, body arriving).
    private var current: Incoming?
    /// Requests given to Hummingbird whose answer has not ended.
    private var withHummingbird = 0
    /// Taken writes, in request order, until answered.
    private var queue = FastWriteQueue()
    /// Parts of requests waiting for `queue` to drain (order against Hummingbird's answers).
    private var held: [HTTPRequestPart] = []
    private var holding = false
    private var readPending = false
    /// Graceful shutdown asked the connection to quiesce while writes here were unanswered: the
    /// event goes on (and the connection closes) once they are.
    private var quiescePending = false

    struct Incoming {
        let request: RestRequest
        let method: HTTPRequest.Method
        let headers: HTTPFields
        var body: ByteBuffer
    }

    init(rest: RestHandler, metrics: NodeMetrics) {
        self.rest = rest
        self.metrics = metrics
    }

    /// Whether the node can use the fast path at all.
    static func enabled(for config: NodeConfiguration) -> Bool {
        config.clientTLS?.clientCAPath == nil
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        eventLoop = context.eventLoop
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        queue.reset()  // the writer holds this sink: break the cycle
        held.removeAll()
    }

    // MARK: - Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        process(unwrapInboundIn(data), context)
    }

    private func process(_ part: HTTPRequestPart, _ context: ChannelHandlerContext) {
        if holding {
            held.append(part)
            return
        }
        switch part {
        case .head(let head):
            if withHummingbird == 0, let incoming = plan(head) {
                current = incoming
                return
            }
            if !queue.isEmpty {
                // Hummingbird would answer this before the writes ahead of it: wait for them.
                holding = true
                held.append(part)
                return
            }
            withHummingbird += 1
            context.fireChannelRead(wrapInboundOut(part))
        case .body(var chunk):
            guard current != nil else { return context.fireChannelRead(wrapInboundOut(part)) }
            current!.body.writeBuffer(&chunk)
        case .end:
            guard let incoming = current else { return context.fireChannelRead(wrapInboundOut(part)) }
            current = nil
            take(incoming, context)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.fireChannelReadComplete()
    }

    /// Hummingbird closes a quiescing connection that has no request of its own in progress; the
    /// writes taken here are answered first (they are committed whatever happens).
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent && !queue.isEmpty {
            quiescePending = true
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// The write this head starts, if it is one the fast path takes.
    private func plan(_ head: HTTPRequest) -> Incoming? {
        switch head.method {
        case .put, .patch, .post, .delete: break
        default: return nil
        }
        let h = head.headerFields
        guard h[.expect] == nil, h[.ifMatch] == nil, h[RestHandler.firebaseETag] == nil, h[RestHandler.methodOverride] == nil,
              h[.transferEncoding] == nil else { return nil }
        if let c = h[.connection], c.lowercased() != "keep-alive" { return nil }
        let length = h[.contentLength].map { Int($0) ?? Int.max } ?? 0
        guard length <= Self.maxBodyBytes, let target = head.path, let req = RestRequest.plainDataWrite(uri: target) else {
            return nil
        }
        var body = context!.channel.allocator.buffer(capacity: length)
        body.clear()
        return Incoming(request: req, method: head.method, headers: h, body: body)
    }

    /// Judges the write as the Hummingbird path does and queues it; a refusal is answered in turn.
    private func take(_ incoming: Incoming, _ context: ChannelHandlerContext) {
        queue.take(incoming.request, method: incoming.method, headers: incoming.headers, body: incoming.body,
                   rest: rest, channel: context.channel, sink: self)
        sendAnswered()
    }

    // MARK: - Answers

    /// Outcomes from the store (its commit thread or the cluster driver): onto the loop.
    func completed(_ outcomes: [(tag: UInt64, outcome: Result<EmberNodeStore.WriteOutcome, any Error>)]) {
        eventLoop?.execute {
            for (tag, outcome) in outcomes { self.queue.fill(tag, outcome) }
            self.sendAnswered()
        }
    }

    /// Writes the answered prefix, in order, with one flush; then lets held requests through.
    private func sendAnswered() {
        guard let context else { return }
        var wrote = false
        while let reply = queue.nextAnswered() {
            let (response, body) = reply.answer.parts
            metrics.recordFastPathRequest()
            if response.status.code >= 400 { metrics.recordRejected(status: response.status.code) }
            context.write(wrapOutboundOut(.head(response)), promise: nil)
            if let body { context.write(wrapOutboundOut(.body(body)), promise: nil) }
            context.write(wrapOutboundOut(.end(nil)), promise: nil)
            wrote = true
        }
        if wrote { context.flush() }
        if queue.isEmpty && holding { release(context) }
        if queue.isEmpty && quiescePending {
            quiescePending = false
            context.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        }
    }

    private func release(_ context: ChannelHandlerContext) {
        holding = false
        let parts = held
        held = []
        for p in parts { process(p, context) }
        // Hummingbird's channel delivers what it was given at the end of a read burst.
        context.fireChannelReadComplete()
        if !holding && readPending {
            readPending = false
            context.read()
        }
    }

    // MARK: - Outbound (Hummingbird's answers)

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { withHummingbird = max(0, withHummingbird - 1) }
        context.write(data, promise: promise)
    }

    /// Stops reading while too many requests are held (TCP backpressure on a pipelining client).
    func read(context: ChannelHandlerContext) {
        if holding && held.count >= Self.maxHeldParts {
            readPending = true
            return
        }
        context.read()
    }
}
