import EmberCore
import EmberStorage
import Logging

/// A single node's store: EmberStorage's LMDB store, where every write is a log entry applied
/// in the same transaction that appends it, and the ports the fronts use over it (`ports`).
public final class LMDBDataStore: StatusPort, StoreLifecycle {
    let store: EmberStore
    let logger: Logger
    /// Built once: the read port keeps the namespaces whose indexes are built.
    public let reader: LMDBReads
    private let hashCache = StateHashCache()

    public init(directory: String, options: StoreOptions, logger: Logger) throws {
        self.store = try EmberStore(directory: directory, options: options)
        self.logger = logger
        self.reader = LMDBReads(store: store)
        if store.objectsInlinedOnOpen > 0 {
            logger.notice("data directory migrated: small objects of the former layout rewritten as inline records",
                          metadata: ["objects": "\(store.objectsInlinedOnOpen)", "directory": "\(directory)"])
        }
    }

    /// The LMDB store under the ports (EmberCluster's Raft host runs over it).
    public var storage: EmberStore { store }
    public var appliedIndex: UInt64 { store.appliedIndex }

    public var ports: NodePorts {
        let admin = LMDBAdmin(store: store)
        return NodePorts(reader: reader, writer: LMDBWrites(store: store), commits: LMDBCommitFeed(store: store),
                         rules: LMDBRules(store: store), onDisconnect: LMDBOnDisconnect(store: store),
                         admin: AdminPorts(status: self, storage: admin, defrag: admin, backup: admin, cluster: nil, alarms: admin),
                         lifecycle: self)
    }

    public func nodeStatus() async throws -> JSON {
        .object([
            "id": .string("single"), "role": .string("leader"), "term": .int(0), "leader": .string("single"),
            "commitIndex": .int(Int64(appliedIndex)), "appliedIndex": .int(Int64(appliedIndex)),
            "stateHash": .string(try await hashCache.hash(of: store)),
        ])
    }

    public var memberDirectory: MemberDirectory? { nil }

    public func shutdown() async { close() }
    public func close() { store.close() }
}

public enum StoreFactory {
    /// The node's durable store in `directory`, keeping `logRetain` log entries after compaction.
    public static func open(directory: String, logRetain: Int, maxReadBytes: Int = StoreOptions().maxReadBytes,
                            mapSize: Int = StoreOptions().mapSize, logger: Logger) throws -> NodePorts {
        var options = StoreOptions()
        options.mapSize = mapSize
        options.logRetention = UInt64(max(0, logRetain))
        options.maxReadBytes = maxReadBytes
        return try LMDBDataStore(directory: directory, options: options, logger: logger).ports
    }
}
