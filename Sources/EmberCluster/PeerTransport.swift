import EmberNodeStore
import EmberRaft
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// The peer channel: one TLS listener for frames from peers, and one outbound connection per
/// peer for frames to it. Connections are one-way (we only write on the ones we dial and only
/// read on the ones we accept), which keeps each side's state trivial; a pair of nodes uses two.
///
/// Delivery is best effort, as Raft expects: frames for a peer that is down wait in a bounded
/// queue (oldest dropped first) and go out when the connection comes back.
public final class PeerTransport: Sendable {
    public let nodeID: NodeID
    let listen: PeerAddress
    let tls: PeerTLS
    let logger: Logger
    let group: MultiThreadedEventLoopGroup
    let onFrame: @Sendable (PeerFrame, NodeID) -> Void
    /// What a refused peer is told (`NotMemberNotice`); nil tells it nothing.
    let membershipNotice: @Sendable () -> NotMemberNotice?
    let queueLimit: Int
    let backoff: (Int, Int)
    private let server = Mutex<(any Channel)?>(nil)
    /// The current members (Raft's voter set, or the configured peers while joining) and one
    /// outbound link per remote member. Replaced by `setMembers` when membership changes.
    private let roster: Mutex<Roster>

    struct Roster {
        var members: Set<NodeID>
        var links: [NodeID: PeerLink]
    }

    /// Threads for the peer channel's event loops (the traffic is a few streams of frames).
    static let eventLoopThreads = 1
    /// Accepted connections open at once (members need one each; the rest are strangers or
    /// reconnects whose old socket has not closed yet).
    static let maxInboundConnections = 64
    /// An accepted connection that has not proven a member identity by then is closed.
    static let handshakeTimeout = TimeAmount.seconds(10)
    private let inboundCount = Atomic<Int>(0)

    public init(config: ClusterConfiguration, tls: PeerTLS, logger: Logger,
                membershipNotice: @escaping @Sendable () -> NotMemberNotice? = { nil },
                onFrame: @escaping @Sendable (PeerFrame, NodeID) -> Void) {
        self.nodeID = config.nodeID
        self.listen = config.peerListen
        self.tls = tls
        self.logger = logger
        self.onFrame = onFrame
        self.membershipNotice = membershipNotice
        self.queueLimit = config.maxQueuedFramesPerPeer
        self.backoff = (config.reconnectMinMillis, config.reconnectMaxMillis)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: Self.eventLoopThreads)
        self.group = group
        self.roster = Mutex(Roster(members: Set(config.voters), links: [:]))
        setMembers(config.peers)
    }

    /// Whether frames from `peer` are accepted (checked per connection and per frame).
    func isMember(_ peer: NodeID) -> Bool { roster.withLock { $0.members.contains(peer) } }

    /// Adopts a new member set: links to new members are made, links to removed ones closed
    /// (and replaced when an address changed); frames from non-members are refused from now on.
    func setMembers(_ addresses: [NodeID: PeerAddress]) {
        let closed = roster.withLock { r -> [PeerLink] in
            r.members = Set(addresses.keys).union([nodeID])
            var gone: [PeerLink] = []
            for (id, link) in r.links where addresses[id] != link.address {
                gone.append(link)
                r.links[id] = nil
            }
            for (id, address) in addresses where id != nodeID && r.links[id] == nil {
                r.links[id] = PeerLink(peer: id, address: address, group: group, tls: tls, queueLimit: queueLimit,
                                       backoff: backoff, logger: logger, onNotice: onFrame)
            }
            return gone
        }
        for link in closed {
            logger.info("peer link closed: no longer a member (or moved)", metadata: ["peer": "\(link.peer)"])
            link.close()
        }
    }

    /// Binds the listener; returns the bound port.
    @discardableResult
    public func start() async throws -> Int {
        let logger = self.logger, onFrame = self.onFrame, context = tls.serverContext, notice = self.membershipNotice
        let transport = self
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            // tcpOption: IPPROTO_TCP. `.socketOption(.tcp_nodelay)` meant SOL_SOCKET + 1 = SO_DEBUG, which
            // only root may set: as any other user (the image, the systemd unit) every peer socket failed.
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                guard transport.inboundCount.add(1, ordering: .relaxed).newValue <= Self.maxInboundConnections else {
                    transport.inboundCount.subtract(1, ordering: .relaxed)
                    logger.warning("peer connection refused: too many connections")
                    return channel.close()
                }
                channel.closeFuture.whenComplete { _ in transport.inboundCount.subtract(1, ordering: .relaxed) }
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLServerHandler(context: context))
                    try sync.addHandler(ByteToMessageHandler(PeerFrameDecoder()))
                    try sync.addHandler(PeerInboundHandler(isMember: { transport.isMember($0) }, members: { transport.roster.withLock { $0.members } },
                                                            notice: notice, logger: logger, onFrame: onFrame))
                }
            }
            .bind(host: listen.host, port: listen.port).get()
        server.withLock { $0 = channel }
        return channel.localAddress?.port ?? listen.port
    }

    /// Queues a frame for `peer` (dropped when the peer is unknown or the frame cannot be encoded).
    /// `level`: the frame needs at least this peer protocol level (beyond its kind's own), e.g. an
    /// append holding an entry only later builds decode.
    /// `entries`: an append's entries already encoded (`PeerFrameCodec.encodedEntries`).
    public func send(_ frame: PeerFrame, to peer: NodeID, level: Int = 1, entries: ByteBuffer? = nil) {
        guard let link = roster.withLock({ $0.links[peer] }) else {
            logger.debug("frame for unknown peer dropped", metadata: ["peer": "\(peer)"])
            return
        }
        let bytes: ByteBuffer
        do { bytes = try PeerFrameCodec.frameBuffer(frame, entries: entries) } catch {
            logger.error("peer frame not sent", metadata: ["peer": "\(peer)", "error": "\(error)"])
            return
        }
        // A node of an older build closes the link on a message kind it does not know; frames of
        // a later level (a shortcut, a check) are not sent there (`PeerLink` knows the level).
        link.send(bytes, level: max(frame.level, level))
    }

    var links: [NodeID: PeerLink] { roster.withLock { $0.links } }

    /// The peer protocol level of `peer`'s connection that is up (nil while not connected).
    func connectedLevel(_ peer: NodeID) -> Int? { roster.withLock { $0.links[peer] }?.connectedLevel }

    /// Whether every one of `peers` accepted peer protocol `level` or later on its last
    /// connection: what a leader checks before it logs an entry kind older builds cannot read.
    func peersSpeak(_ level: Int, _ peers: [NodeID]) -> Bool {
        let links = self.links
        return peers.allSatisfy { (links[$0]?.knownLevel ?? 0) >= level }
    }

    public func connectedPeers() -> [NodeID] { links.filter { $0.value.isConnected }.map(\.key).sorted() }

    func linkStats() -> [NodeID: (connected: Bool, queued: Int, dropped: UInt64, level: Int)] { links.mapValues(\.stats) }

    public func shutdown() async {
        let channel = server.withLock { c in defer { c = nil }; return c }
        try? await channel?.close()
        let all = roster.withLock { r in defer { r.links = [:] }; return r.links }
        for link in all.values { link.close() }
        try? await group.shutdownGracefully()
    }
}

/// Splits the byte stream into frame bodies, refusing any frame over the limit.
struct PeerFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let header = buffer.getBytes(at: buffer.readerIndex, length: PeerFrameCodec.headerBytes),
              let length = try PeerFrameCodec.bodyLength(header),
              buffer.readableBytes >= PeerFrameCodec.headerBytes + length else { return .needMoreData }
        buffer.moveReaderIndex(forwardBy: PeerFrameCodec.headerBytes)
        context.fireChannelRead(wrapInboundOut(buffer.readSlice(length: length)!))
        return .continue
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        try decode(context: context, buffer: &buffer)
    }
}

/// Accepted connections: learns who the peer is from its certificate, then delivers its frames.
final class PeerInboundHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let isMember: @Sendable (NodeID) -> Bool
    let members: @Sendable () -> Set<NodeID>
    let notice: @Sendable () -> NotMemberNotice?
    let logger: Logger
    let onFrame: @Sendable (PeerFrame, NodeID) -> Void
    var peer: NodeID?
    /// Refused with a notice: the connection lingers briefly so the notice is read, and
    /// whatever the dialer sends meanwhile is dropped.
    var refused = false

    /// How long a refused connection stays open after its notice was written (the dialer closes
    /// it as soon as it has read the notice; closing at once could reset it before that).
    static let noticeLinger = TimeAmount.seconds(1)

    init(isMember: @escaping @Sendable (NodeID) -> Bool, members: @escaping @Sendable () -> Set<NodeID>,
         notice: @escaping @Sendable () -> NotMemberNotice? = { nil }, logger: Logger,
         onFrame: @escaping @Sendable (PeerFrame, NodeID) -> Void) {
        self.isMember = isMember
        self.members = members
        self.notice = notice
        self.logger = logger
        self.onFrame = onFrame
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // Strangers must not hold a connection open without ever completing the handshake.
        let channel = context.channel
        let verified = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: PeerTransport.handshakeTimeout) {
            if verified.value.peer == nil { channel.close(promise: nil) }
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tlsEvent = event as? TLSUserEvent, case .handshakeCompleted = tlsEvent {
            var names: [String] = []
            do {
                if let cert = try context.pipeline.syncOperations.nioSSL_peerCertificate() {
                    names = try PeerTLS.names(of: cert)
                }
            } catch {
                logger.warning("peer certificate unreadable", metadata: ["error": "\(error)"])
            }
            let current = members()
            if let id = PeerTLS.identify(names, members: current, expected: nil) {
                peer = id
                logger.debug("peer connected", metadata: ["peer": "\(id)"])
            } else if !names.isEmpty, Set(names).isDisjoint(with: current), let notice = notice(),
                      let bytes = try? PeerFrameCodec.frameBuffer(.notMember(notice)) {
                // A certificate of our CA for a node that is not (or no longer) a member: say so,
                // or a member removed while it was down would campaign against us forever.
                logger.warning("peer connection refused: certificate names no cluster member; told it so",
                               metadata: ["remote": "\(context.remoteAddress.map { "\($0)" } ?? "?")", "names": "\(names)",
                                          "configIndex": "\(notice.configIndex)"])
                refused = true
                let channel = context.channel
                context.writeAndFlush(wrapOutboundOut(bytes)).whenComplete { _ in
                    channel.eventLoop.scheduleTask(in: Self.noticeLinger) { channel.close(promise: nil) }
                }
                return
            } else {
                logger.warning("peer connection refused: certificate names no cluster member",
                               metadata: ["remote": "\(context.remoteAddress.map { "\($0)" } ?? "?")", "names": "\(names)"])
                context.close(promise: nil)
                return
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if refused { return }  // a refused dialer's queued frames: it is about to read our notice
        guard let peer else {
            context.close(promise: nil)  // data before a verified handshake: never expected
            return
        }
        let frame: PeerFrame
        do { frame = try PeerFrameCodec.decode(unwrapInboundIn(data)) } catch {
            logger.warning("bad peer frame; closing", metadata: ["peer": "\(peer)", "error": "\(error)"])
            context.close(promise: nil)
            return
        }
        // A member removed since it connected is heard no more.
        guard isMember(peer) else {
            logger.info("frames from a removed member refused; closing", metadata: ["peer": "\(peer)"])
            context.close(promise: nil)
            return
        }
        // A verified peer may only speak for itself.
        guard frame.sender == peer else {
            logger.warning("peer frame with a forged sender dropped", metadata: ["peer": "\(peer)", "sender": "\(frame.sender)"])
            return
        }
        onFrame(frame, peer)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if peer == nil {
            logger.warning("peer connection refused", metadata: [
                "remote": "\(context.remoteAddress.map { "\($0)" } ?? "?")", "error": "\(error)"])
        } else {
            logger.info("peer connection closed", metadata: ["peer": "\(peer!)", "error": "\(error)"])
        }
        context.close(promise: nil)
    }
}

extension PeerFrame {
    var sender: NodeID {
        switch self {
        case .raft(let m): return m.from
        case .forward(let r): return r.from
        case .forwardReply(let r): return r.from
        case .forwardBatch(let b): return b.from
        case .forwardBatchReply(let r): return r.from
        case .admin(let a): return a.from
        case .adminReply(let r): return r.from
        case .notMember(let n): return n.from
        case .hashCheck(let h): return h.from
        }
    }
}
