import EmberCore
import EmberRules
import EmberStorage
import Synchronization

/// The read port over the node's LMDB state: a single node's, and a cluster member's (whose
/// applied state is the same kind of store; it adds its reserved namespace and a ReadIndex
/// barrier).
public final class LMDBReads: ReadPort {
    let store: EmberStore
    let refuseReserved: @Sendable (String) throws -> Void
    let barrier: @Sendable () async throws -> Void
    /// Index definitions from the rules; applied to a namespace the first time it is queried
    /// (namespaces come into being on first use). Building reads the existing data.
    private let indexDefs = Mutex<[IndexDefinition]>([])
    private let indexedNamespaces = Mutex<Set<String>>([])

    /// `refuseReserved`: throws for namespaces clients may not read. `linearizableBarrier`: what
    /// `?consistency=linearizable` waits for (nothing on a single node).
    public init(store: EmberStore,
                refuseReserved: @escaping @Sendable (String) throws -> Void = LMDBTranslation.refuseReserved,
                linearizableBarrier: @escaping @Sendable () async throws -> Void = {}) {
        self.store = store
        self.refuseReserved = refuseReserved
        self.barrier = linearizableBarrier
    }

    public var appliedIndex: UInt64 { store.appliedIndex }

    public func read(namespace: String, path: Path) throws -> ReadResult {
        try refuseReserved(namespace)
        let r = try LMDBTranslation.translating { try store.readSnapshot(namespace: namespace, path: path) }
        return ReadResult(node: r.node, version: r.version, appliedIndex: r.applied)
    }

    public func shallowKeys(namespace: String, path: Path, after: String?, limit: Int) throws -> [String] {
        try refuseReserved(namespace)
        return try LMDBTranslation.translating { try store.shallowKeys(namespace: namespace, path: path, after: after, limit: limit) }
    }

    public func withRulesData<T>(namespace: String, _ body: (any RulesDataSource) throws -> T) throws -> T {
        try refuseReserved(namespace)
        return try LMDBTranslation.translating { try store.withRulesData(namespace: namespace, body) }
    }

    public func prepareQueries(namespace: String) async throws {
        try refuseReserved(namespace)
        guard !indexedNamespaces.withLock({ $0.contains(namespace) }) else { return }
        let specs = try indexDefs.withLock { defs in
            try defs.map { try IndexSpec(location: "/" + $0.pattern.joined(separator: "/"), indexes: $0.indexes) }
        }
        do { try await store.setIndexes(namespace: namespace, specs) } catch let e as StorageError {
            throw LMDBTranslation.translate(e)
        }
        _ = indexedNamespaces.withLock { $0.insert(namespace) }
    }

    public func query(namespace: String, path: Path, query: QuerySpec) throws -> ReadResult {
        try refuseReserved(namespace)
        let children = try LMDBTranslation.translating { try store.query(namespace: namespace, path: path, spec: query) }
        var kids: KeyMap<Node> = [:]
        for (k, n) in children { kids[k] = n }
        return ReadResult(node: Node(children: kids), version: 0, appliedIndex: store.appliedIndex)
    }

    public func setIndexes(_ defs: [IndexDefinition]) throws {
        indexDefs.withLock { $0 = defs }
        indexedNamespaces.withLock { $0.removeAll() }
    }

    public func visibleReads() async { await store.released() }

    public func linearizableBarrier() async throws { try await barrier() }
}
