import EmberCore
import EmberNodeStore
import EmberRules

/// What the node's alarms refuse, checked on every client request's way to the store: CORRUPT
/// refuses everything (reads, listens, writes: 503, wire `unavailable`; `GatedReads` and
/// `MeteredWrites`), NOSPACE refuses writes (507, wire `insufficient_storage`).
struct AlarmGate: Sendable {
    let alarms: (any AlarmPort)?

    /// CORRUPT: this member's data may be wrong, so it serves none; clients use another member.
    func checkServing() throws {
        guard let a = alarms?.raised.first(where: { $0.kind == .corrupt }) else { return }
        throw StoreUnavailable("CORRUPT: this member's data disagrees with the cluster's and it serves none until repaired "
                               + "(wipe and resync, see OPERATIONS.md); use another member. \(a.message)")
    }

    /// NOSPACE: no room for the write (measured now if the last measure is stale, so writes
    /// resume by themselves once space is freed).
    func checkWrite() throws {
        try checkServing()
        guard let alarms, !alarms.hasRoomForWrites else { return }
        throw StoreRefusal.noSpace(alarms.raised.first { $0.kind == .noSpace }?.message ?? "no room for writes")
    }
}

/// The node's read port behind the CORRUPT alarm: reads, queries and listens' first reads are
/// refused while it is raised. Rules data is not gated (a write's rules check reads it; writes
/// are refused by `MeteredWrites`).
struct GatedReads: ReadPort {
    let inner: any ReadPort
    let gate: AlarmGate

    var appliedIndex: UInt64 { inner.appliedIndex }
    func read(namespace: String, path: Path) throws -> ReadResult {
        try gate.checkServing()
        return try inner.read(namespace: namespace, path: path)
    }
    func shallowKeys(namespace: String, path: Path, after: String?, limit: Int) throws -> [String] {
        try gate.checkServing()
        return try inner.shallowKeys(namespace: namespace, path: path, after: after, limit: limit)
    }
    func withRulesData<T>(namespace: String, _ body: (any RulesDataSource) throws -> T) throws -> T {
        try inner.withRulesData(namespace: namespace, body)
    }
    func openReadStream(namespace: String, path: Path, format: TreeJSONFormat, query: QuerySpec?) throws -> (any ReadStream)? {
        try gate.checkServing()
        return try inner.openReadStream(namespace: namespace, path: path, format: format, query: query)
    }
    func prepareQueries(namespace: String) async throws {
        try gate.checkServing()
        try await inner.prepareQueries(namespace: namespace)
    }
    func query(namespace: String, path: Path, query: QuerySpec) throws -> ReadResult {
        try gate.checkServing()
        return try inner.query(namespace: namespace, path: path, query: query)
    }
    func setIndexes(_ defs: [IndexDefinition]) throws { try inner.setIndexes(defs) }
    func visibleReads() async { await inner.visibleReads() }
    func linearizableBarrier() async throws {
        try gate.checkServing()
        try await inner.linearizableBarrier()
    }
}
