import EmberCore
import EmberStorage
import Logging
import Synchronization

/// A single node's store: EmberStorage's LMDB store, where every write is a log entry applied
/// in the same transaction that appends it, and the ports the fronts use over it (`ports`).
public final class LMDBDataStore: StatusPort, StoreLifecycle {
    let store: EmberStore
    let logger: Logger
    /// Built once: the read port keeps the namespaces whose indexes are built.
    public let reader: LMDBReads
    private let hashCache = StateHashCache()
    /// The point-in-time archive's writer, when the node archives (`startArchive`).
    private let archiverSlot = Mutex<Archiver?>(nil)

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
        var ports = NodePorts(reader: reader, writer: LMDBWrites(store: store), commits: LMDBCommitFeed(store: store),
                              rules: LMDBRules(store: store), onDisconnect: LMDBOnDisconnect(store: store),
                              admin: AdminPorts(status: self, storage: admin, defrag: admin, backup: admin, cluster: nil, alarms: admin,
                                                archive: archiver),
                              lifecycle: self)
        ports.triggers = LMDBTriggers(store: store)
        return ports
    }

    public func nodeStatus() async throws -> JSON {
        .object([
            "id": .string("single"), "role": .string("leader"), "term": .int(0), "leader": .string("single"),
            "commitIndex": .int(Int64(appliedIndex)), "appliedIndex": .int(Int64(appliedIndex)),
            "stateHash": .string(try await hashCache.hash(of: store)),
        ]).withArchive(archiver)
    }

    public var archiver: Archiver? { archiverSlot.withLock { $0 } }

    /// Starts the point-in-time archive's writer over this store (`isLeader`: whether this
    /// node writes it now; `mark`: how an `.archived` entry reaches the log).
    @discardableResult
    public func startArchive(_ options: ArchiveOptions, isLeader: @escaping @Sendable () -> Bool,
                             mark: @escaping @Sendable (UInt64) async throws -> Void) throws -> Archiver {
        let archiver = Archiver(store: store, archive: try options.store ?? DirectoryArchiveStore(directory: options.directory), options: options,
                                logger: logger, isLeader: isLeader, mark: mark)
        archiverSlot.withLock { $0 = archiver }
        archiver.start()
        return archiver
    }

    public var memberDirectory: MemberDirectory? { nil }

    public func shutdown() async {
        await archiver?.stop()
        close()
    }
    public func close() {
        archiver?.stopBlocking()
        store.close()
    }
}

public enum StoreFactory {
    /// The node's durable store in `directory`, keeping `logRetain` log entries after compaction.
    public static func open(directory: String, logRetain: Int, maxReadBytes: Int = StoreOptions().maxReadBytes,
                            mapSize: Int = StoreOptions().mapSize, archive: ArchiveOptions? = nil, logger: Logger) throws -> NodePorts {
        var options = StoreOptions()
        if archive != nil { options.archiveHold = StoreOptions.defaultArchiveHold }
        options.mapSize = mapSize
        options.logRetention = UInt64(max(0, logRetain))
        // A single node's archive rows go table by table once archived, not row by row (`LogRing`).
        options.alternatingLog = archive != nil && options.logRetention == 0
        options.maxReadBytes = maxReadBytes
        let local = try LMDBDataStore(directory: directory, options: options, logger: logger)
        if let archive {
            let store = local.storage
            // A single node is its own leader; its marks go through its writer like any entry.
            try local.startArchive(archive, isLeader: { true }, mark: { index in
                _ = try await store.submit(namespace: Archiver.markNamespace, .archived(through: index))
            })
        }
        return local.ports
    }
}

extension JSON {
    /// A node status with the archive's section added (when the node archives).
    public func withArchive(_ archiver: Archiver?) -> JSON {
        guard let archiver, case .object(var o) = self else { return self }
        o["archive"] = archiver.archiveStatus().json
        return .object(o)
    }
}
