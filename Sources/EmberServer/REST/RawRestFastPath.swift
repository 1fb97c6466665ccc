import EmberProtocol
import HTTPTypes
import NIOCore

/// REST data writes read and answered as bytes, in front of the HTTP stack: no NIO HTTP parse,
/// no HTTPTypes conversion, no response encoder. On a small write those were over a third of a
/// node's CPU (docs/benchmarks-history.md "REST writes"); this reads the head itself (`RawWriteHead`), judges
/// and queues the write like `RestFastPath` (`FastWriteQueue`), and writes the answer's bytes.
///
/// It is the first handler after TLS on a new HTTP connection, and takes requests while they are
/// plain writes. At the first request it does not take (a read, a stream, an upgrade, anything it
/// does not fully understand), it waits until the writes it took are answered, hands every byte
/// it holds to the HTTP stack behind it and leaves the pipeline: from there on the connection is
/// served as before (where `RestFastPath` still takes plain writes). So answers leave in request
/// order and the full stack sees whole requests from the start of one.
///
/// Graceful shutdown (or the client closing its side) closes a connection still served here once
/// its writes are answered, as Hummingbird closes an idle one.
final class RawRestFastPath: ChannelDuplexHandler, RemovableChannelHandler, WriteOutcomeSink, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    /// Writes taken and unanswered before the connection stops being read (TCP backpressure on a
    /// pipelining client).
    static let maxUnanswered = 256

    let rest: RestHandler
    let metrics: NodeMetrics

    // Event loop only (`@unchecked Sendable`: `completed` hops onto the loop first).
    private var eventLoop: (any EventLoop)?
    private var context: ChannelHandlerContext?
    private var queue = FastWriteQueue()
    private var answers = RawAnswers()
    /// Bytes read and not yet taken (a partial request, or what waits for the HTTP stack).
    private var pending: ByteBuffer?
    /// A request not taken here has arrived: everything goes to the HTTP stack once `queue` drains.
    private var handingOver = false
    /// Close once `queue` drains (graceful shutdown, or the client finished sending).
    private var closing = false
    /// Events for the HTTP stack that arrived while handing over.
    private var heldEvents: [Any] = []
    private var readPending = false

    init(rest: RestHandler, metrics: NodeMetrics) {
        self.rest = rest
        self.metrics = metrics
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        eventLoop = context.eventLoop
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        queue.reset()
        pending = nil
    }

    // MARK: - Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if pending == nil || pending!.readableBytes == 0 {
            pending = bytes
        } else {
            pending!.writeBuffer(&bytes)
        }
        takeRequests(context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // The HTTP stack gets its read-complete with the bytes it is handed.
    }

    /// Takes every whole write in `pending`, in order, until a request is not one to take.
    private func takeRequests(_ context: ChannelHandlerContext) {
        while !handingOver && !closing && queue.count < Self.maxUnanswered, let buffer = pending, buffer.readableBytes > 0 {
            switch buffer.withUnsafeReadableBytes({ RawWriteHead.parse($0) }) {
            case .incomplete:
                return
            case .other:
                handingOver = true
            case .write(let head):
                let total = head.headLength + head.contentLength
                guard buffer.readableBytes >= total else { return }
                let body = buffer.getSlice(at: buffer.readerIndex + head.headLength, length: head.contentLength)!
                pending!.moveReaderIndex(forwardBy: total)
                var headers = HTTPFields()
                if let authorization = head.authorization { headers[.authorization] = authorization }
                queue.take(head.request, method: Self.method(head.method), headers: headers, body: body,
                           rest: rest, channel: context.channel, sink: self)
            }
        }
        sendAnswered()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if handingOver {
            heldEvents.append(event)
        } else if event is ChannelShouldQuiesceEvent || (event as? ChannelEvent) == .inputClosed {
            // Nothing is with the HTTP stack: close once the writes taken here are answered.
            closing = true
            sendAnswered()
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    static func method(_ m: RawWriteHead.Method) -> HTTPRequest.Method {
        switch m {
        case .put: .put
        case .patch: .patch
        case .post: .post
        case .delete: .delete
        }
    }

    // MARK: - Answers

    /// Outcomes from the store (its commit thread or the cluster driver): onto the loop.
    func completed(_ outcomes: [(tag: UInt64, outcome: Result<EmberNodeStore.WriteOutcome, any Error>)]) {
        eventLoop?.execute {
            guard self.context != nil else { return }
            for (tag, outcome) in outcomes { self.queue.fill(tag, outcome) }
            self.sendAnswered()
            if let context = self.context, !self.handingOver, self.queue.count < Self.maxUnanswered { self.takeRequests(context) }
        }
    }

    /// Writes the answered prefix, in order, with one flush; then hands over, closes or reads on.
    private func sendAnswered() {
        guard let context else { return }
        // Every answer ready now leaves in one buffer, one write.
        var out: ByteBuffer?
        while let reply = queue.nextAnswered() {
            if out == nil { out = context.channel.allocator.buffer(capacity: 384) }
            let status = answers.write(reply, into: &out!)
            metrics.recordFastPathRequest()
            if status >= 400 { metrics.recordRejected(status: status) }
        }
        if let out { context.writeAndFlush(wrapOutboundOut(.byteBuffer(out)), promise: nil) }
        guard queue.isEmpty else { return }
        if handingOver {
            handOver(context)
        } else if closing {
            context.close(promise: nil)
        } else if readPending {
            readPending = false
            context.read()
        }
    }

    /// Gives the HTTP stack what it has not seen yet, and leaves the pipeline.
    private func handOver(_ context: ChannelHandlerContext) {
        if let rest = pending, rest.readableBytes > 0 {
            pending = nil
            context.fireChannelRead(wrapInboundOut(rest))
            context.fireChannelReadComplete()
        }
        for event in heldEvents { context.fireUserInboundEventTriggered(event) }
        heldEvents = []
        let reading = readPending, channel = context.channel
        readPending = false
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        if reading { channel.read() }
    }

    // MARK: - Outbound

    /// Stops reading while writes here are unanswered and either too many or the connection is
    /// being handed over (the bytes would pile up here).
    func read(context: ChannelHandlerContext) {
        if !queue.isEmpty && (handingOver || queue.count >= Self.maxUnanswered) {
            readPending = true
            return
        }
        context.read()
    }
}
