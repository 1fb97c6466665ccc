import EmberProtocol
import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// A group of raw protocol-v5 WebSocket connections, each listening to one path. Each is one
/// NIO channel handler (no Swift task, no WebSocket library) that writes the upgrade request,
/// reads unmasked server frames and scans them for the few fields the bench needs, so one bench
/// process holds tens of thousands of listeners and its own CPU stays small beside emberd's.
final class ConnectionSet: @unchecked Sendable {
    let host: String
    let port: Int
    /// Request target of the upgrade (`/.ws?v=5&ns=...`).
    let target: String
    let stats: Stats
    /// Local address the connections are made from (`127.0.0.N`): one source address has
    /// ~28,000 ephemeral ports toward one server port, so larger sets spread over several.
    let source: String?
    private let channels = Mutex<[any Channel]>([])

    /// `url`: `ws://HOST:PORT/TARGET`.
    init(url: String, stats: Stats, source: String? = nil) {
        let rest = url.hasPrefix("ws://") ? String(url.dropFirst(5)) : url
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let hostPort = rest[..<slash]
        let colon = hostPort.lastIndex(of: ":")
        host = colon.map { String(hostPort[..<$0]) } ?? String(hostPort)
        port = colon.flatMap { Int(hostPort[hostPort.index(after: $0)...]) } ?? 80
        target = slash == rest.endIndex ? "/" : String(rest[slash...])
        self.stats = stats
        self.source = source
    }

    /// Opens `count` connections (at most `window` handshaking at once) and returns when each
    /// has completed hello + listen or failed; returns the number that succeeded.
    func open(count: Int, window: Int, path: (Int) -> String) async throws -> Int {
        let local = try source.map { try SocketAddress(ipAddress: $0, port: 0) }
        let base = stats.lock.withLock { $0.ready + $0.failed }
        for i in 0..<count {
            while true {
                let done = stats.lock.withLock { $0.ready + $0.failed } - base
                if i - done < window { break }
                try await Task.sleep(for: .milliseconds(1))
            }
            let (stats, host, target, listenPath) = (self.stats, "\(host):\(port)", self.target, path(i))
            // One bootstrap per connection: its initializer carries the connection's path.
            var bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connectTimeout(.seconds(30))
            if let local { bootstrap = bootstrap.bind(to: local) }
            bootstrap.channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        LeanListener(host: host, target: target, path: listenPath, stats: stats))
                }
            }
            .connect(host: self.host, port: port)
            .whenComplete { result in
                switch result {
                case .success(let channel): self.channels.withLock { $0.append(channel) }
                case .failure: stats.lock.withLock { $0.failed += 1 }
                }
            }
        }
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let settled = stats.lock.withLock { $0.ready + $0.failed } - base
            if settled >= count { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        let (ready, failed) = stats.lock.withLock { ($0.ready, $0.failed) }
        if failed > 0 || ready - base < count { print("  (\(ready - base) of \(count) connections ready, \(failed) failed)") }
        return ready - base
    }

    /// Closes every connection (client close frame, then the socket) and waits up to 30 s.
    func close() async {
        let all = channels.withLock { all -> [any Channel] in
            defer { all = [] }
            return all
        }
        let closed = all.map { channel in
            channel.writeAndFlush(LeanListener.clientFrame(opcode: 0x8, payload: [0x03, 0xE8]))
                .flatMap { channel.close() }
        }
        let deadline = ContinuousClock.now + .seconds(30)
        for f in closed {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { break }
            _ = try? await f.get()
        }
    }
}

/// One listener connection: upgrade, hello, one `q` listen, then data pushes scanned for a
/// number. Runs on its channel's event loop only.
final class LeanListener: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Largest server frame the bench accepts (its pushes are small).
    static let maxFrameBytes = 1 << 20

    let host: String
    let target: String
    let path: String
    let stats: Stats
    private var upgraded = false
    private var listenSent = false
    private var settled = false
    private var received: ByteBuffer?

    init(host: String, target: String, path: String, stats: Stats) {
        self.host = host
        self.target = target
        self.path = path
        self.stats = stats
    }

    func channelActive(context: ChannelHandlerContext) {
        let request = WebSocketUpgrade.request(host: host, target: target)
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: request)), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if received == nil { received = bytes } else { received!.writeBuffer(&bytes) }
        if !upgraded {
            guard let end = received!.readableBytesView.firstRange(of: Array("\r\n\r\n".utf8)) else { return }
            let headLength = end.upperBound - received!.readerIndex
            let head = received!.readString(length: headLength) ?? ""
            guard WebSocketUpgrade.accepted(head) else { return fail(context) }
            upgraded = true
        }
        while let frame = nextFrame() {
            switch frame.opcode {
            case 0x0, 0x1: text(context, frame.payload)
            case 0x8:
                fail(context)
                return
            case 0x9: context.writeAndFlush(wrapOutboundOut(Self.clientFrame(opcode: 0xA, payload: frame.payload)), promise: nil)
            default: break
            }
        }
        if received!.readableBytes == 0 { received = nil } else if received!.readableBytes > Self.maxFrameBytes + 14 { fail(context) }
    }

    /// The next whole frame in `received` (server frames are unmasked), or nil.
    private func nextFrame() -> (opcode: UInt8, payload: [UInt8])? {
        guard var b = received, let header = WebSocketFrameHeader(b.readableBytesView),
              header.payloadLength <= UInt64(Self.maxFrameBytes) else { return nil }
        b.moveReaderIndex(forwardBy: header.length)
        guard let payload = b.readBytes(length: Int(header.payloadLength)) else { return nil }
        received = b
        return (header.opcode, payload)
    }

    private func text(_ context: ChannelHandlerContext, _ bytes: [UInt8]) {
        let now = nowMicros()
        if !listenSent {  // first message: the server hello
            listenSent = true
            let listen = #"{"t":"d","d":{"r":1,"a":"q","b":{"p":"\#(path)","h":""}}}"#
            context.writeAndFlush(wrapOutboundOut(Self.clientFrame(opcode: 0x1, payload: Array(listen.utf8))), promise: nil)
            return
        }
        if !settled, isListenOK(bytes) {
            settled = true
            stats.lock.withLock { $0.ready += 1 }
            return
        }
        if let v = numberData(bytes) { stats.received(v, at: now) }
    }

    private func fail(_ context: ChannelHandlerContext) {
        settle()
        context.close(promise: nil)
    }

    private func settle() {
        guard !settled else { return }
        settled = true
        stats.lock.withLock { $0.failed += 1 }
    }

    func channelInactive(context: ChannelHandlerContext) {
        settle()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(context)
    }

    /// A client frame (RFC 6455: masked; the all-zero key leaves the payload as it is).
    static func clientFrame(opcode: UInt8, payload: [UInt8]) -> ByteBuffer {
        ByteBuffer(bytes: WebSocketClientFrame.encode(opcode: opcode, payload: payload))
    }
}
