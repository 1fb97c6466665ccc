import EmberCore
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1

/// Wraps the node's HTTP child channel so that a request whose head (request line and headers)
/// the HTTP parser refuses as too large gets an answer: 414 `{"error": ...}`, then the
/// connection closes. The limits are `RestRequest.maxTargetBytes` (request target) and
/// `maxHeadBytes` (request line + headers). Without this the parser's error reached no handler
/// (it fires before Hummingbird sets up its request stream) and the client waited for an
/// answer that never came.
struct RequestHeadLimitChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value
    let base: Base

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        base.setup(channel: channel, logger: logger).flatMapThrowing { value in
            try channel.pipeline.syncOperations.addHandler(HeadOverflowResponder())
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

/// Passes everything through; answers `HTTPParserError.headerOverflow` once and closes.
final class HeadOverflowResponder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    typealias OutboundOut = HTTPServerResponsePart

    static let message = "Request line or headers too large: a request target may have at most "
        + "\(RestRequest.maxTargetBytes) bytes (the longest Firebase path, percent-encoded, with a "
        + "query) and the request line with all headers at most \(RestRequest.maxHeadBytes) bytes"

    private var answered = false

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let e = error as? HTTPParserError, e == .headerOverflow else {
            context.fireErrorCaught(error)
            return
        }
        if answered { return }
        answered = true
        let body = JSON.object(["error": .string(Self.message)]).serialized()
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/json; charset=utf-8")
        headers.add(name: "content-length", value: String(body.utf8.count))
        headers.add(name: "connection", value: "close")
        let head = HTTPResponseHead(version: .http1_1, status: .uriTooLong, headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: body)))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}
