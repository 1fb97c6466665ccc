import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOWebSocket

/// The node's HTTP/1.1 child channel: REST and SSE through Hummingbird, and the upgrade to the
/// wire protocol (`/.ws`), after which the connection is a `WireConnection` channel handler.
///
/// Hummingbird's WebSocket channel keeps one Swift task per connection for the connection's
/// life (with its async stack, an async channel wrapper and a WebSocket actor): ~tens of KiB
/// per idle connection. Here the upgrade installs a channel handler and the connection's task
/// ends, so an idle connection costs its socket, its pipeline and its session.
struct WireServerChannel: ServerChildChannel, HTTPChannelHandler {
    enum Outcome: Sendable {
        /// Upgraded: the connection lives in its `WireConnection` handler.
        case webSocket
        case http(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
        /// An upgrade request this node refuses (not `/.ws`, bad headers): 400, then close.
        case refusedUpgrade(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
    }

    struct Value: ServerChildChannelValue {
        let outcome: EventLoopFuture<Outcome>
        let channel: any Channel
    }

    let responder: HTTPChannelHandler.Responder
    let http1: HTTP1Channel.Configuration
    /// Largest inbound WebSocket frame (wire frames hold up to 16384 characters: 64 KiB of UTF-8).
    let maxFrameSize: Int
    let node: EmberNode
    /// Shared by every connection's request handler.
    let services: RealtimeHandler.Services

    init(responder: @escaping HTTPChannelHandler.Responder, http1: HTTP1Channel.Configuration, maxFrameSize: Int, node: EmberNode) {
        self.responder = Self.redirectingLateUpgrades(responder)
        self.http1 = http1
        self.maxFrameSize = maxFrameSize
        self.node = node
        services = RealtimeHandler.Services(store: node.ports, config: node.config, policy: node.policy, reads: node.reads,
                                            onDisconnect: node.onDisconnect, catchUp: node.catchUp)
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            // A connection keeps its last receive buffer for the next read (NIO's pooled receive
            // buffer); NIO's first one is 2 KiB, held by every idle connection. Requests and wire
            // messages are mostly far smaller; a busy connection's reads still grow it.
            try channel.syncOptions?.setOption(ChannelOptions.recvAllocator, value: Self.receiveBuffers)
            // Plain data writes are read and answered as bytes until the first other request.
            if RestFastPath.enabled(for: node.config) {
                try channel.pipeline.syncOperations.addHandler(RawRestFastPath(rest: node.rest, metrics: node.metrics))
            }
            let attempted = NIOLoopBoundBox(false, eventLoop: channel.eventLoop)
            let (node, services) = (self.node, self.services)
            let upgrader = NIOTypedWebSocketServerUpgrader<Outcome>(
                maxFrameSize: maxFrameSize,
                shouldUpgrade: { (channel: any Channel, head: HTTPRequestHead) -> EventLoopFuture<HTTPHeaders?> in
                    attempted.value = true
                    return channel.eventLoop.makeSucceededFuture(WireConnection.target(of: head) == nil ? nil : HTTPHeaders())
                },
                upgradePipelineHandler: { (channel: any Channel, head: HTTPRequestHead) -> EventLoopFuture<Outcome> in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(WireConnection(channel: channel, head: head, node: node, services: services, logger: logger))
                        return .webSocket
                    }
                })
            let http1 = self.http1
            let upgrades = NIOTypedHTTPServerUpgradeConfiguration<Outcome>(upgraders: [upgrader]) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                    try channel.pipeline.syncOperations.addHandlers(http1.additionalChannelHandlers())
                    try channel.pipeline.syncOperations.addHandler(
                        HTTPConnectionStateHandler(idleTimeout: http1.idleTimeout.map { .init($0) }, logger: logger))
                    let wrapped = try NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>(
                        wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
                    return attempted.value ? .refusedUpgrade(wrapped) : .http(wrapped)
                }
            }
            var pipeline = NIOUpgradableHTTPServerPipelineConfiguration<Outcome>(upgradeConfiguration: upgrades)
            pipeline.enablePipelining = false  // requests are taken one by one by the async channel
            pipeline.enableErrorHandling = false  // HeadOverflowResponder answers parser errors
            pipeline.enableResponseHeaderValidation = false  // HTTPTypes validated the fields
            pipeline.decoderConfiguration.maxHeaderFieldSize = http1.httpDecoder.maxHeaderFieldSize
            pipeline.decoderConfiguration.maxHeaderListSize = http1.httpDecoder.maxHeaderListSize
            pipeline.decoderConfiguration.maxHeaderFieldCount = http1.httpDecoder.maxHeaderFieldCount
            let outcome = try channel.pipeline.syncOperations.configureUpgradableHTTPServerPipeline(configuration: pipeline)
            return Value(outcome: outcome, channel: channel)
        }
    }

    /// Receive buffers: 512 bytes first, adapting between 64 bytes and 64 KiB to what reads bring.
    static let receiveBuffers = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65_536)

    func handle(value: Value, logger: Logger) async {
        do {
            switch try await value.outcome.get() {
            case .webSocket:
                // The connection is served by its channel handler from here on: no task waits for it.
                return
            case .http(let http):
                await handleHTTP(asyncChannel: http, logger: logger)
            case .refusedUpgrade(let http):
                try await http.executeThenClose { _, outbound in
                    let head = HTTPResponse(status: .badRequest, headerFields: [.connection: "close", .contentLength: "0"])
                    try await outbound.write(contentsOf: [.head(head), .end(nil)])
                }
            }
        } catch {
            logger.debug("connection ended before it was set up", metadata: ["error": "\(error)"])
        }
    }

    /// An upgrade request after an ordinary request on the same connection cannot be upgraded
    /// (the upgrade handler is gone by then): the client is sent to the same URL on a new
    /// connection (307, `connection: close`).
    static func redirectingLateUpgrades(_ responder: @escaping HTTPChannelHandler.Responder) -> HTTPChannelHandler.Responder {
        struct LateUpgrade: Error {}
        return { request, writer, channel in
            guard request.headers[.upgrade]?.lowercased() == "websocket" else {
                try await responder(request, writer, channel)
                return
            }
            var location = request.uri.path
            if let query = request.uri.query { location += "?" + query }
            try await writer.writeResponse(HTTPResponse(status: .temporaryRedirect, headerFields: [.connection: "close", .location: location]))
            throw LateUpgrade()
        }
    }
}
