import EmberCore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOWebSocket

/// Connects Hummingbird's WebSocket upgrade to the wire protocol: `ws://HOST:PORT/.ws?v=5&ns=NS`.
enum WebSocketGlue {
    static func shouldUpgrade(head: HTTPRequest, channel: any Channel, node: EmberNode) -> ShouldUpgradeResult<WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>> {
        guard let target = head.path, target == "/.ws" || target.hasPrefix("/.ws?") || target.hasPrefix("/.ws/") else {
            return .dontUpgrade
        }
        var namespace = node.config.defaultNamespace
        if let q = target.firstIndex(of: "?"), let items = PercentDecoding.queryItems(target[target.index(after: q)...]) {
            for (k, v) in items where k == "ns" && Key.isValid(v) { namespace = v }
        }
        let ns = namespace
        let host = head.authority ?? "\(node.config.host):\(node.config.port)"
        let address = ClientCredentials.address(of: channel)
        return .upgrade([:]) { inbound, outbound, context in
            let base = await ClientCertificate.baseIdentity(of: channel, config: node.config)
            await run(inbound: inbound, outbound: outbound, namespace: ns, host: host, address: address, base: base, node: node,
                      logger: context.logger, channel: channel)
        }
    }

    static func run(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, namespace: String,
                    host: String, address: String?, base: Identity = .anonymous, node: EmberNode, logger: Logger,
                    channel: (any Channel)? = nil) async {
        let id = UUID().uuidString.lowercased()
        let perAddress = node.rest.connectionsPerAddress
        guard perAddress.acquire(address) else {
            try? await outbound.close(.policyViolation, reason: perAddress.refusal)
            return
        }
        defer { perAddress.release(address) }
        guard let session = node.realtime.open(id: id, namespace: namespace, address: address, base: base) else {
            try? await outbound.close(.unexpectedServerError, reason: "too many connections")
            return
        }
        // A new identity (another user, unauth, an expired token) may read less: listens it may
        // no longer read end with `c`.
        let clock = node.rest.clock
        let gate = RulesGate(store: node.store, defaults: node.config.rules)
        session.onIdentityChanged { session in RealtimeHandler.rejudgeListens(of: session, gate: gate, now: clock()) }
        let handler = RealtimeHandler(session: session, store: node.store, config: node.config, clock: node.rest.clock, reads: node.reads,
                                      addressRate: node.rest.addressRequestRate,
                                      pipeline: WirePipeline(store: node.store, session: session))
        let nodes = node.config.operations.handshakeClientURLs(directory: node.store.memberDirectory)
        let hello = WireMessages.hello(timestamp: node.rest.clock(), host: host, session: id, nodes: nodes)
        if let channel {
            // Frames go straight to the socket from whichever thread produces them (one flush per
            // event-loop turn, `ConnectionOutbox`): no task runs per message, and none waits per
            // idle connection; the close starts when the session ends.
            session.attach(channel: channel) {
                Task { await closeSocket(of: session, outbound: outbound, logger: logger) }
            }
            session.send(hello)
            await readRequests(inbound: inbound, session: session, handler: handler, logger: logger)
            session.finish(reason: session.closeReason)
        } else {
            session.send(hello)
            await withTaskGroup(of: Void.self) { group in
                // Writer: drains the session's ordered queue to the socket.
                group.addTask {
                    while let frames = await session.nextFrames() {
                        do { for frame in frames { try await outbound.write(.text(frame)) } } catch { break }
                    }
                    let reason = session.closeReason ?? "closed"
                    try? await outbound.close(.normalClosure, reason: String(reason.prefix(120)))
                }
                await readRequests(inbound: inbound, session: session, handler: handler, logger: logger)
                session.finish(reason: session.closeReason)
                group.cancelAll()
            }
        }
        node.realtime.close(session)
        // Pipelined writes still queued are ordered before the onDisconnect writes anyway (one
        // queue); waiting keeps their outcomes from racing the connection's last identity.
        await handler.pipeline?.drained()
        // onDisconnect operations run in log order like any write, after the connection is gone,
        // judged by the rules as the connection's last identity.
        let identity = session.identity
        for (path, kind) in session.takeOnDisconnect() {
            do {
                _ = try await node.store.write(WriteRequest(namespace: namespace, path: path, kind: kind, identity: identity))
            } catch {
                logger.warning("onDisconnect write failed", metadata: ["path": "\(path)", "error": "\(error)"])
            }
        }
    }

    /// Handles requests in arrival order until the client closes, the connection fails or the
    /// session ends.
    static func readRequests(inbound: WebSocketInboundStream, session: RealtimeSession, handler: RealtimeHandler,
                             logger: Logger) async {
        var reassembler = WireReassembler(maxMessageBytes: session.limits.maxMessageBytes)
        do {
            for try await message in inbound.messages(maxSize: session.limits.maxMessageBytes) {
                guard case .text(let frame) = message else { continue }
                let out: WireReassembler.Output
                do { out = try reassembler.feed(frame) } catch {
                    session.finish(reason: "message too large")
                    break
                }
                if case .message(let text) = out { await handler.handle(text) }
            }
        } catch {
            logger.debug("websocket read ended", metadata: ["error": "\(error)"])
        }
    }

    /// The session ended: what is still queued goes out, then the close frame with the reason
    /// (a connection cut off as a slow consumer is already closed; only the log says why).
    static func closeSocket(of session: RealtimeSession, outbound: WebSocketOutboundWriter, logger: Logger) async {
        await session.flushRemaining()
        let reason = session.closeReason ?? "closed"
        if reason.contains("slow consumer") {
            logger.warning("websocket cut off", metadata: ["reason": "\(reason)", "session": "\(session.id)"])
        }
        try? await outbound.close(.normalClosure, reason: String(reason.prefix(120)))
    }
}
