import EmberCore
import EmberRules
import EmberStorage
import Logging
import Synchronization

/// The durable `DataStore`: EmberStorage's LMDB store, where every write is a log entry applied
/// in the same transaction that appends it.
public final class LMDBDataStore: DataStore {
    let store: EmberStore
    let logger: Logger
    /// Index definitions from the rules; applied to a namespace the first time it is queried
    /// (namespaces come into being on first use). Building reads the existing data.
    private let indexDefs = Mutex<[IndexDefinition]>([])
    private let indexedNamespaces = Mutex<Set<String>>([])
    private let hashCache = StateHashCache()

    public init(directory: String, options: StoreOptions, logger: Logger) throws {
        self.store = try EmberStore(directory: directory, options: options)
        self.logger = logger
        if store.objectsInlinedOnOpen > 0 {
            logger.notice("data directory migrated: small objects of the former layout rewritten as inline records",
                          metadata: ["objects": "\(store.objectsInlinedOnOpen)", "directory": "\(directory)"])
        }
    }

    public var appliedIndex: UInt64 { store.appliedIndex }
    public var storage: EmberStore { store }
    public var storageEngine: EmberStore? { store }

    public func read(namespace: String, path: Path) throws -> ReadResult {
        try Self.refuseReserved(namespace)
        do {
            let r = try store.readSnapshot(namespace: namespace, path: path)
            return ReadResult(node: r.node, version: r.version, appliedIndex: r.applied)
        } catch let e as StorageError { throw Self.translate(e) }
    }

    public func shallowKeys(namespace: String, path: Path, after: String?, limit: Int) throws -> [String] {
        try Self.refuseReserved(namespace)
        do { return try store.shallowKeys(namespace: namespace, path: path, after: after, limit: limit) } catch let e as StorageError { throw Self.translate(e) }
    }

    public func withRulesData<T>(namespace: String, _ body: (any RulesDataSource) throws -> T) throws -> T {
        try Self.refuseReserved(namespace)
        do { return try store.withRulesData(namespace: namespace, body) } catch let e as StorageError { throw Self.translate(e) }
    }

    public func prepareQueries(namespace: String) async throws {
        try Self.refuseReserved(namespace)
        try await ensureIndexes(namespace)
    }

    public func query(namespace: String, path: Path, query: QuerySpec) throws -> ReadResult {
        try Self.refuseReserved(namespace)
        do {
            let children = try store.query(namespace: namespace, path: path, spec: query)
            var kids: [String: Node] = [:]
            for (k, n) in children { kids[k] = n }
            return ReadResult(node: Node(children: kids), version: 0, appliedIndex: store.appliedIndex)
        } catch let e as StorageError { throw Self.translate(e) }
    }

    public func setIndexes(_ defs: [IndexDefinition]) throws {
        indexDefs.withLock { $0 = defs }
        indexedNamespaces.withLock { $0.removeAll() }
    }

    func ensureIndexes(_ namespace: String) async throws {
        guard !indexedNamespaces.withLock({ $0.contains(namespace) }) else { return }
        let specs = try indexDefs.withLock { defs in
            try defs.map { try IndexSpec(location: "/" + $0.pattern.joined(separator: "/"), indexes: $0.indexes) }
        }
        do { try await store.setIndexes(namespace: namespace, specs) } catch let e as StorageError { throw Self.translate(e) }
        _ = indexedNamespaces.withLock { $0.insert(namespace) }
    }

    public func write(_ request: WriteRequest) async throws -> WriteOutcome {
        try Self.refuseReserved(request.namespace)
        let result: WriteResult
        do {
            // The store fixes the entry's timestamp itself (monotonic across the log).
            result = try await store.submit(namespace: request.namespace, Self.operation(for: request),
                                            auth: request.identity.writeAuth, writer: request.writer)
        } catch let e as StorageError { throw Self.translate(e) }
        return try Self.outcome(of: result)
    }

    public func pipelinedWriter(sink: any WriteOutcomeSink) -> (any PipelinedWriter)? {
        LMDBPipelinedWriter(store: store, sink: LMDBPipelinedWriter.OutcomeAdapter(sink: sink))
    }

    /// The storage operation a front write request becomes.
    public static func operation(for request: WriteRequest) -> WriteOperation {
        let condition: EmberStorage.WriteCondition? = request.condition.map {
            switch $0 {
            case .etag(let e): return .ifMatch(e)
            case .version(let v): return .ifVersion(v)
            case .hash(let h): return .ifHash(h)
            }
        }
        switch request.kind {
        case .set(let json): return .set(path: request.path, value: json, condition: condition)
        case .update(let parts): return .update(path: request.path, values: parts, condition: condition)
        }
    }

    /// The front's answer for an applied entry (on a replica: the local apply's result).
    public static func outcome(of result: WriteResult) throws -> WriteOutcome {
        switch result.outcome {
        case .applied, .noop:
            // For a set this is the value now at the path; for an update, the resolved parts
            // at their relative paths (what REST echoes for PATCH).
            return WriteOutcome(index: result.index, applied: true, value: result.value, version: result.version,
                                duplicate: result.duplicate)
        case .conditionFailed(let current, let version):
            return WriteOutcome(index: result.index, applied: false, value: current, version: version)
        case .rejected(let e):
            throw Self.translate(e)
        case .denied:
            throw PermissionDenied()
        }
    }

    /// The onDisconnect bookkeeping namespace is the store's own: clients never read or write it.
    public static func refuseReserved(_ namespace: String) throws {
        if namespace == OnDisconnectTable.namespace {
            throw StoreRefusal.forbidden("Namespace \(namespace) is reserved for onDisconnect bookkeeping")
        }
        if namespace == WriterTable.namespace {
            throw StoreRefusal.forbidden("Namespace \(namespace) is reserved for the log's record of writers (exactly-once)")
        }
    }

    // MARK: - onDisconnect

    public func logOnDisconnect(_ op: OnDisconnectOperation, namespace: String, identity: Identity) async throws -> Bool {
        let result: WriteResult
        do {
            result = try await store.submit(namespace: namespace, .onDisconnect(op), auth: identity.writeAuth)
        } catch let e as StorageError { throw Self.translate(e) }
        return try Self.onDisconnectOutcome(result)
    }

    /// False: a `register` whose incarnation no longer holds its node's sessions.
    public static func onDisconnectOutcome(_ result: WriteResult) throws -> Bool {
        switch result.outcome {
        case .conditionFailed: return false
        case .rejected(let e): throw translate(e)
        case .denied: throw PermissionDenied()
        case .applied, .noop: return true
        }
    }

    public var onDisconnectBook: OnDisconnectBook? { OnDisconnectBook(store: store) }

    // MARK: - Rules

    public func setRules(namespace: String, text: String) async throws {
        try Self.refuseReserved(namespace)
        let result: WriteResult
        do { result = try await store.submit(namespace: namespace, .setRules(text: text)) } catch let e as StorageError {
            throw Self.translate(e)
        }
        if case .rejected(let e) = result.outcome { throw Self.translate(e) }
    }

    public func storedRules(namespace: String) -> StoredRules? { store.storedRules(namespace: namespace) }

    public func setDefaultRules(_ engine: RulesEngine) { store.setDefaultRules(engine) }

    public func onRulesChanged(_ handler: @escaping @Sendable (String) -> Void) {
        store.onCommit { results in
            for r in results where r.rulesChanged { handler(r.namespace) }
        }
    }

    public func onCommit(_ handler: @escaping @Sendable ([CommittedChange]) -> Void) {
        store.onCommit { results in
            var changes: [CommittedChange] = []
            changes.reserveCapacity(results.count)
            for r in results {
                if let change = Self.change(from: r) { changes.append(change) }
                // An onDisconnect run: each write it ran is a change of its own.
                for ran in r.ran { if let change = Self.change(from: ran) { changes.append(change) } }
            }
            if !changes.isEmpty { handler(changes) }
        }
    }

    /// A write's listener-facing form: a set at its path, or a merge of the parts that changed.
    static func change(from r: WriteResult) -> CommittedChange? {
        let parts = r.changeSet.changes
        guard !parts.isEmpty else { return nil }
        if parts.count == 1 && parts[0].path == r.path {
            return CommittedChange(index: r.index, namespace: r.namespace, path: r.path, kind: .set(parts[0].node))
        }
        let rel = parts.compactMap { p in r.path.relative(p.path).map { ($0, p.node) } }
        return CommittedChange(index: r.index, namespace: r.namespace, path: r.path, kind: .merge(rel))
    }

    public func close() { store.close() }

    public func nodeStatus() async throws -> JSON {
        .object([
            "id": .string("single"), "role": .string("leader"), "term": .int(0), "leader": .string("single"),
            "commitIndex": .int(Int64(appliedIndex)), "appliedIndex": .int(Int64(appliedIndex)),
            "stateHash": .string(try await hashCache.hash(of: store)),
        ])
    }

    /// Storage errors as client errors: bad input is 400, a full queue is 503 (retryable).
    public static func translate(_ e: StorageError) -> Error {
        switch e {
        case .invalid(let inner): return inner
        case .queueFull, .closed: return StoreUnavailable("\(e)")
        case .invalidNamespace, .entryTooLarge, .tooManyIndexes, .invalidRules, .readTooLarge:
            return StoreRefusal.badRequest("\(e)")
        default: return e
        }
    }
}

public enum StoreFactory {
    /// The node's durable store in `directory`, keeping `logRetain` log entries after compaction.
    public static func open(directory: String, logRetain: Int, maxReadBytes: Int = StoreOptions().maxReadBytes,
                            logger: Logger) throws -> any DataStore {
        var options = StoreOptions()
        options.logRetention = UInt64(max(0, logRetain))
        options.maxReadBytes = maxReadBytes
        return try LMDBDataStore(directory: directory, options: options, logger: logger)
    }
}
