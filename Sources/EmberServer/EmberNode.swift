import EmberCore
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOSSL
import ServiceLifecycle

/// One running node: the storage, the listener hub and the HTTP front, wired together.
public final class EmberNode: Sendable {
    public let config: NodeConfiguration
    /// The store's ports, the write port metered (`MeteredWrites`).
    public let ports: NodePorts
    public let hub: StreamHub
    public let realtime: RealtimeHub
    let rest: RestHandler
    /// Rate limits, per-address limits and identity: one policy for the REST and wire fronts.
    let policy: ClientPolicy
    let logger: Logger
    /// Prometheus metrics (`/metrics`) and the operations endpoints in front of `rest`.
    public let metrics: NodeMetrics
    let admin: AdminFront
    /// Clients' reads of stored data run here, off Swift's cooperative threads.
    public let reads: ReadPool
    /// Committed changes on their way from the storage writer to the listeners, in order.
    public let feed: ChangeFeed
    /// Durable onDisconnect: this node's sessions' writes in the log, and the leader's lease.
    public let onDisconnect: OnDisconnectKeeper
    /// Trigger delivery (issue 36), while this node delivers (single node; cluster leader).
    let triggers: TriggerWorker?
    /// Holds client reads until this node caught up with its cluster since it started
    /// (a single node: open from the start).
    let catchUp: NodeCatchUp

    public init(config: NodeConfiguration, ports store: NodePorts, logger: Logger) throws {
        self.config = config
        let metrics = NodeMetrics()
        self.metrics = metrics
        // Every client write passes the metered write port (REST and WebSocket).
        var metered = store
        // …and every client request the alarms' refusals (CORRUPT: all, NOSPACE: writes).
        let alarmGate = AlarmGate(alarms: store.admin.alarms)
        metered.writer = MeteredWrites(inner: store.writer, metrics: metrics, gate: alarmGate)
        metered.reader = GatedReads(inner: store.reader, gate: alarmGate)
        self.ports = metered
        self.logger = logger
        let feed = ChangeFeed()
        self.feed = feed
        self.hub = StreamHub(limits: config.streamLimits)
        self.realtime = RealtimeHub(limits: config.realtimeLimits, feed: feed)
        self.reads = ReadPool(limits: config.readPool)
        self.onDisconnect = OnDisconnectKeeper(store: store, realtime: realtime, settings: config.onDisconnect, logger: logger)
        let policy = ClientPolicy(config: config)
        self.policy = policy
        // A member reads nothing to clients before it applied what its cluster had committed
        // when it started (docs/CLUSTER.md): a wiped or long-stopped member's tree is stale.
        let reader = store.reader
        let catchUp = store.admin.cluster == nil ? NodeCatchUp.caughtUp()
            : NodeCatchUp.catchingUp(limits: config.operations.catchUp, barrier: { try await reader.linearizableBarrier() },
                                     removed: { [cluster = store.admin.cluster] in cluster?.probe().removed ?? false }, logger: logger)
        self.catchUp = catchUp
        let rest = RestHandler(store: metered, hub: hub, config: config, reads: reads, policy: policy, catchUp: catchUp)
        self.rest = rest
        self.triggers = store.triggers.map { TriggerWorker(port: $0, runtime: rest.triggerRuntime, logger: logger) }
        self.admin = AdminFront(rest: rest, store: metered, hub: hub, realtime: realtime, metrics: metrics, config: config,
                                 logger: logger, catchUp: catchUp)
        store.commits.onBatchCommitted { entries in metrics.recordBatch(entries: entries) }
        if let alarms = store.admin.alarms {
            let hub = self.hub, realtime = self.realtime
            for a in alarms.raised { logger.error("alarm raised", metadata: ["alarm": "\(a.kind.rawValue)", "message": "\(a.message)"]) }
            alarms.observe { kind, alarm in
                guard let alarm else {
                    logger.notice("alarm cleared", metadata: ["alarm": "\(kind.rawValue)"])
                    return
                }
                logger.error("alarm raised", metadata: ["alarm": "\(kind.rawValue)", "message": "\(alarm.message)"])
                // CORRUPT: open listeners must not go on with data that may be wrong; their
                // clients reconnect, and this member refuses their listens (AlarmGate).
                if kind == .corrupt {
                    realtime.dropAll(reason: "this member's data is corrupt; reconnect to another member")
                    hub.closeAll()
                }
            }
        }
        try store.reader.setIndexes(config.rules.indexes)
        store.rules.setDefaultRules(config.rules.engine)
        let hub = self.hub
        let realtime = self.realtime
        // The writer thread only queues the change; the feed's thread finds its listeners and
        // builds their events, while the writer goes on with the next commit.
        feed.start { change in
            hub.publish(change)
            realtime.publish(change)
        }
        // Only the namespaces some listener is on: a commit nobody listens to (a learner's or a
        // follower's usual case) builds no change and wakes no feed thread.
        store.commits.onCommit(watched: { EmberNode.watchedNamespaces(hub, realtime) }) { changes in feed.publish(changes) }
        // A rules change judges open listens again; those that lost read access are cancelled.
        let gate = RulesGate(store: store, defaults: config.rules)
        let clock = policy.clock
        store.rules.onRulesChanged { ns in feed.enqueue {
            let now = clock()
            hub.revoke(namespace: ns) { path, identity in
                (try? gate.canRead(ns, path, identity, query: nil, now: now)) ?? false
            }
            realtime.revoke(namespace: ns) { path, query, identity in
                (try? gate.canRead(ns, path, identity, query: query.isDefault ? nil : query, now: now)) ?? false
            }
        } }
        // No change set describes a replaced state: every listener gets its location's complete
        // new data in place, in order with later changes (the hook runs after the install and
        // before later entries are applied, outside any write transaction).
        // It runs on the feed after every earlier change was delivered, while the caller (which
        // applies later entries) waits.
        store.commits.onStateReplaced { [weak self] in
            guard let self else { return }
            self.feed.sync { self.resyncListeners() }
        }
    }

    deinit {
        feed.stop()
    }

    /// The namespaces the node's SSE streams and WebSocket listens are on (empty: none).
    static func watchedNamespaces(_ hub: StreamHub, _ realtime: RealtimeHub) -> Set<String> {
        var namespaces: Set<String> = []
        hub.addWatchedNamespaces(to: &namespaces)
        realtime.addWatchedNamespaces(to: &namespaces)
        return namespaces
    }

    /// Resynchronises every SSE stream and WebSocket listen with the store's current state, as
    /// after a snapshot install; the rules are judged again (the snapshot carries them too).
    /// Called by the store's state-replaced hook (and by tests through it).
    func resyncListeners() {
        let gate = RulesGate(store: ports, defaults: config.rules)
        let now = policy.clock()
        let reader = ports.reader
        hub.resync(stillAllowed: { ns, path, identity in
            (try? gate.canRead(ns, path, identity, query: nil, now: now)) ?? false
        }, read: { ns, path in try reader.read(namespace: ns, path: path) })
        realtime.resync(stillAllowed: { ns, path, query, identity in
            (try? gate.canRead(ns, path, identity, query: query.isDefault ? nil : query, now: now)) ?? false
        }, read: { ns, path in try reader.read(namespace: ns, path: path) })
        logger.info("listeners resynchronised after state replacement",
                    metadata: ["streams": "\(hub.count)", "connections": "\(realtime.connectionCount)"])
    }

    /// Serves until SIGTERM/SIGINT, then closes streams and the store.
    public func run(onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        let admin = self.admin
        let responder = CallbackResponder<EmberRequestContext> { request, context in
            await admin.respond(to: request, channel: context.channel)
        }
        // Wire frames hold up to 16384 characters (reference §6.2), i.e. up to 64 KiB of UTF-8;
        // the library's default 16 KiB limit dropped clients sending non-ASCII text.
        // The HTTP parser's default 80 KiB head limit is below the longest Firebase path when
        // percent-encoded (RestRequest.maxTargetBytes); longer heads get 414 (RequestHeadLimitChannel).
        var http1 = HTTP1Channel.Configuration()
        http1.httpDecoder = .init(maxHeaderFieldSize: RestRequest.maxTargetBytes, maxHeaderListSize: RestRequest.maxHeadBytes)
        // Plain data writes are served on the event loop (RestFastPath); the rest goes on to Hummingbird.
        if RestFastPath.enabled(for: config) {
            let rest = self.rest, metrics = self.metrics
            http1.additionalChannelHandlers = { [RestFastPath(rest: rest, metrics: metrics)] }
        }
        // `/.ws` upgrades to the wire protocol, served by a channel handler per connection (WireServerChannel).
        var server = HTTPServerBuilder { [self, http1] responder in
            RequestHeadLimitChannel(base: WireServerChannel(responder: responder, http1: http1,
                                                            maxFrameSize: WireFraming.maxFrameCharacters * 4, node: self))
        }
        if let tls = config.clientTLS { server = try .tls(server, tlsConfiguration: try tls.serverConfiguration()) }
        let app = Application(
            responder: responder,
            server: server,
            configuration: .init(address: .hostname(config.host, port: config.port), serverName: "Ember"),
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
            logger: logger.deferringMetadata())
        // Services stop in reverse order: the stream closer first, so open SSE/WebSocket streams
        // (whose clients may be long gone) do not hold the HTTP server's graceful shutdown.
        let group = ServiceGroup(configuration: .init(
            services: [app, StreamCloser(hub: hub, realtime: realtime, lifecycle: ports.lifecycle)],
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        onDisconnect.start()
        triggers?.start()
        let autoDefrag: Task<Void, Never>? = config.operations.autoDefrag.flatMap { policy in
            ports.admin.storage.flatMap { stats in ports.admin.defrag.map { defrag in
                Task { [logger] in await AutoDefrag(policy: policy, stats: stats, defrag: defrag, logger: logger).run() }
            } }
        }
        let result: Result<Void, any Error>
        do { try await group.run(); result = .success(()) } catch { result = .failure(error) }
        // A defrag under way finishes before the store closes.
        autoDefrag?.cancel()
        await autoDefrag?.value
        await onDisconnect.stop()
        await triggers?.stop()
        catchUp.stop()
        realtime.dropAll(reason: "node shutting down")
        hub.closeAll()
        // Reads still running finish before the store closes under them.
        await reads.shutdown()
        await ports.shutdown()
        feed.stop()
        try result.get()
    }
}

/// Waits for graceful shutdown, then ends every listener stream. WebSocket clients are dropped
/// without the protocol's shutdown message (`s`), which would tell SDKs never to reconnect: a
/// node that stops is usually restarted, or its cluster peers serve the clients.
struct StreamCloser: Service {
    let hub: StreamHub
    let realtime: RealtimeHub
    let lifecycle: any StoreLifecycle

    func run() async throws {
        try? await gracefulShutdown()
        // Writes waiting on the store are answered (503) rather than holding the HTTP drain.
        lifecycle.shuttingDown()
        realtime.dropAll(reason: "node shutting down")
        hub.closeAll()
    }
}
