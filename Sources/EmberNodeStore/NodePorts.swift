/// A node's store as its fronts use it: one port per role. Built by `LMDBDataStore.ports`
/// (single node) and EmberCluster's `ReplicatedDataStore.ports` (cluster member); the fronts
/// hold the ports they need and never see the store behind them.
public struct NodePorts: Sendable {
    public var reader: any ReadPort
    public var writer: any WritePort
    public var commits: any CommitFeedPort
    public var rules: any RulesPort
    public var onDisconnect: any OnDisconnectPort
    public var admin: AdminPorts
    /// Stops the store behind the ports.
    public var lifecycle: any StoreLifecycle
    /// Database triggers (nil: a store without them).
    public var triggers: (any TriggersPort)?

    public init(reader: any ReadPort, writer: any WritePort, commits: any CommitFeedPort, rules: any RulesPort,
                onDisconnect: any OnDisconnectPort, admin: AdminPorts, lifecycle: any StoreLifecycle) {
        self.reader = reader
        self.writer = writer
        self.commits = commits
        self.rules = rules
        self.onDisconnect = onDisconnect
        self.admin = admin
        self.lifecycle = lifecycle
    }

    /// Orderly stop (waits for background work).
    public func shutdown() async { await lifecycle.shutdown() }
    /// Synchronous stop; `shutdown()` is preferred.
    public func close() { lifecycle.close() }
}

/// The operations endpoints' ports. Storage ports are nil where a store has no such storage.
public struct AdminPorts: Sendable {
    public var status: any StatusPort
    public var storage: (any StorageStatsPort)?
    public var defrag: (any DefragPort)?
    public var backup: (any BackupPort)?
    /// The cluster port of a cluster member (nil on a single node).
    public var cluster: (any ClusterControl)?
    /// NOSPACE and CORRUPT (nil: the store raises none).
    public var alarms: (any AlarmPort)?
    /// The point-in-time archive (nil: the node does not archive).
    public var archive: (any ArchivePort)?

    public init(status: any StatusPort, storage: (any StorageStatsPort)?, defrag: (any DefragPort)?,
                backup: (any BackupPort)?, cluster: (any ClusterControl)?, alarms: (any AlarmPort)? = nil,
                archive: (any ArchivePort)? = nil) {
        self.archive = archive
        self.status = status
        self.storage = storage
        self.defrag = defrag
        self.backup = backup
        self.cluster = cluster
        self.alarms = alarms
    }
}

public protocol StoreLifecycle: Sendable {
    /// Orderly stop (waits for background work); `close()` is the synchronous fallback.
    func shutdown() async
    func close()
    /// The node began a graceful shutdown (before the fronts drain their requests): give up
    /// waits that would hold a request open forever (a Raft loop waiting for disk room).
    func shuttingDown()
}

extension StoreLifecycle {
    public func shuttingDown() {}
}
