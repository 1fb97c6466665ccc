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
        let handler = RealtimeHandler(session: session, store: node.store, config: node.config, clock: node.rest.clock,
                                      addressRate: node.rest.addressRequestRate,
                                      pipeline: WirePipeline(store: node.store, session: session))
        session.send(WireMessages.hello(timestamp: node.rest.clock(), host: host, session: id))
        await withTaskGroup(of: Void.self) { group in
            // Writer: drains the session's ordered queue to the socket.
            group.addTask {
                while let frames = await session.nextFrames() {
                    do {
                        if let channel { try await writeFrames(frames, to: channel) } else {
                            for frame in frames { try await outbound.write(.text(frame)) }
                        }
                    } catch { break }
                }
                let reason = session.closeReason ?? "closed"
                try? await outbound.close(.normalClosure, reason: String(reason.prefix(120)))
            }
            // Reader: handles requests in arrival order.
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
            session.finish(reason: session.closeReason)
            group.cancelAll()
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

    /// Writes a batch of text frames as one buffer with one hop to the event loop and one flush
    /// (one socket write for a whole commit's acks), and returns when it is written: the next
    /// batch waits, so a slow client backs up into the session's bounded queue. The frames are
    /// encoded here (RFC 6455: FIN + text opcode, unmasked as a server's are; no extensions are
    /// configured) and written just below the channel's WebSocket frame encoder, through any TLS.
    static func writeFrames(_ frames: [String], to channel: any Channel) async throws {
        guard !frames.isEmpty else { return }
        let done = channel.eventLoop.makePromise(of: Void.self)
        channel.eventLoop.execute {
            do {
                let encoder = try channel.pipeline.syncOperations.context(handlerType: WebSocketFrameEncoder.self)
                var size = 0
                for f in frames { size += f.utf8.count + 10 }
                var buffer = channel.allocator.buffer(capacity: size)
                for f in frames { appendTextFrame(f, to: &buffer) }
                encoder.writeAndFlush(NIOAny(buffer), promise: done)
            } catch {
                done.fail(error)
            }
        }
        try await done.futureResult.get()
    }

    static func appendTextFrame(_ text: String, to buffer: inout ByteBuffer) {
        let n = text.utf8.count
        buffer.writeInteger(UInt8(0x81))
        if n < 126 {
            buffer.writeInteger(UInt8(n))
        } else if n <= 0xFFFF {
            buffer.writeInteger(UInt8(126))
            buffer.writeInteger(UInt16(n))
        } else {
            buffer.writeInteger(UInt8(127))
            buffer.writeInteger(UInt64(n))
        }
        buffer.writeString(text)
    }
}
