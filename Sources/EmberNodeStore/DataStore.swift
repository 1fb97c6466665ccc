import EmberCore
import EmberRules
import EmberStorage

/// What a write must find at its location to go ahead. Decided when the write is applied, in
/// log order, so every replica reaches the same verdict.
public enum WriteCondition: Sendable, Equatable {
    /// REST `if-match`: `null_etag` means "absent", otherwise an ETag from `ETag.of`.
    case etag(String)
    /// Ember wire extension: the path version the client saw.
    case version(UInt64)
    /// Wire protocol compare-and-set: the §6.8 hash of the current value ("" = absent).
    case hash(String)
}

public struct WriteRequest: Sendable {
    public enum Kind: Sendable {
        /// Replace the value at `path` (null deletes).
        case set(JSON)
        /// Multi-path update: relative paths → values (null deletes), atomic.
        case update([(Path, JSON)])
    }

    public var namespace: String
    public var path: Path
    public var kind: Kind
    public var condition: WriteCondition?
    /// Who writes: the entry carries it and the rules judge it when the entry is applied.
    /// Required: a default would silently make a forgotten identity an admin write.
    public var identity: Identity
    /// The client's name for the write (exactly-once across resends: `WriterStamp`), if it gave one.
    public var writer: WriterStamp?

    public init(namespace: String, path: Path, kind: Kind, condition: WriteCondition? = nil, identity: Identity,
                writer: WriterStamp? = nil) {
        self.namespace = namespace
        self.path = path
        self.kind = kind
        self.condition = condition
        self.identity = identity
        self.writer = writer
    }
}

public struct WriteOutcome: Sendable {
    /// The log index the write was decided at.
    public var index: UInt64
    /// False when the condition did not hold: nothing was written.
    public var applied: Bool
    /// After a set: the value at the path. After an update: the resolved parts at their relative
    /// paths. When not applied: the current value.
    public var value: Node
    public var version: UInt64
    /// A stamped write its writer had already run: answered as the first time, not applied again.
    public var duplicate = false

    public init(index: UInt64, applied: Bool, value: Node, version: UInt64, duplicate: Bool = false) {
        self.index = index
        self.applied = applied
        self.value = value
        self.version = version
        self.duplicate = duplicate
    }
}

/// One committed write as listeners see it: resolved values (server values already computed).
public struct CommittedChange: Sendable {
    public enum Kind: Sendable {
        case set(Node)
        case merge([(Path, Node)])
    }

    public var index: UInt64
    public var namespace: String
    public var path: Path
    public var kind: Kind

    public init(index: UInt64, namespace: String, path: Path, kind: Kind) {
        self.index = index
        self.namespace = namespace
        self.path = path
        self.kind = kind
    }
}

/// A consistent read: the data and the log index the snapshot reflects.
public struct ReadResult: Sendable {
    public var node: Node
    public var version: UInt64
    public var appliedIndex: UInt64

    public init(node: Node, version: UInt64, appliedIndex: UInt64) {
        self.node = node
        self.version = version
        self.appliedIndex = appliedIndex
    }
}

/// Location pattern (may hold `$wildcard` segments) and the index names defined there.
public struct IndexDefinition: Sendable, Equatable {
    public var pattern: [String]
    public var indexes: [String]

    public init(pattern: [String], indexes: [String]) {
        self.pattern = pattern
        self.indexes = indexes
    }
}

/// The node's storage as the front sees it. The durable implementation is LMDB (`LMDBDataStore`).
public protocol DataStore: AnyObject, Sendable {
    func read(namespace: String, path: Path) throws -> ReadResult
    /// The first `limit` child keys at `path` in key order, without reading the children's
    /// subtrees (`shallow=true` over a large tree costs a seek per child, not a full read).
    /// `after`: only keys after this one (a page of a long child list).
    func shallowKeys(namespace: String, path: Path, after: String?, limit: Int) throws -> [String]
    /// Runs `body` over one consistent snapshot of a namespace, read on demand by rules (so a
    /// rule's `root.child('big').exists()` does not load `big`).
    func withRulesData<T>(namespace: String, _ body: (any RulesDataSource) throws -> T) throws -> T
    /// Readies a namespace for `query`: builds its indexes the first time it is queried (which
    /// writes); cheap afterwards. Awaited before the query itself runs on the read pool.
    func prepareQueries(namespace: String) async throws
    /// Runs a query at `path`, reading an index range when one is defined (after `prepareQueries`).
    /// Synchronous store work: the front runs it on its `ReadPool`.
    func query(namespace: String, path: Path, query: QuerySpec) throws -> ReadResult
    /// `now` is the time server values see when the store does not fix it in the entry itself.
    func write(_ request: WriteRequest) async throws -> WriteOutcome
    func setIndexes(_ defs: [IndexDefinition]) throws
    /// Called once per commit with its writes' changes (none empty), in log order, after they are
    /// durable. Must not block.
    func onCommit(_ handler: @escaping @Sendable ([CommittedChange]) -> Void)
    var appliedIndex: UInt64 { get }
    func close()
    /// Returns once a read on this node reflects every write acknowledged (anywhere) before the
    /// call: REST `?consistency=linearizable`. A single node is always there.
    func linearizableBarrier() async throws
    /// `GET /.ember/status`: role, term, indexes, state hash.
    func nodeStatus() async throws -> JSON
    /// The cluster's current members as this node knows them, with the client URLs operators
    /// gave when adding them (cheap: read on every WebSocket handshake); nil for a single node.
    var memberDirectory: MemberDirectory? { get }
    /// The LMDB store under this one (storage figures for `/metrics`; nil for test doubles).
    var storageEngine: EmberStore? { get }
    /// The cluster port of a cluster member (nil on a single node).
    var cluster: (any ClusterControl)? { get }
    /// Orderly stop (waits for background work); `close()` is the synchronous fallback.
    func shutdown() async
    /// Called when the whole state was replaced (a cluster follower installed a snapshot), so
    /// listeners cannot be fed a change set and must resynchronise.
    func onStateReplaced(_ handler: @escaping @Sendable () -> Void)

    // MARK: Rules (replicated like data: a `.setRules` log entry per namespace)

    /// Replaces a namespace's rules through the log (admin). Bad rules: 400 with line and reason.
    func setRules(namespace: String, text: String) async throws
    /// The rules stored for a namespace (committed on this node), if any.
    func storedRules(namespace: String) -> StoredRules?
    /// Rules for namespaces without stored rules (the `--rules` file); writes are judged by it.
    func setDefaultRules(_ engine: RulesEngine)
    /// Called (on the commit path, in log order) with the namespace whose rules changed.
    func onRulesChanged(_ handler: @escaping @Sendable (String) -> Void)

    /// See `PipelinedWriter`; the default is nil.
    func pipelinedWriter(sink: any WriteOutcomeSink) -> (any PipelinedWriter)?

    // MARK: onDisconnect (replicated: `WriteOperation.onDisconnect` entries)

    /// Logs onDisconnect bookkeeping for a session of `namespace`; a `register` carries
    /// `identity`, whom the rules judge its write as when it runs. Returns once applied here;
    /// false when a `register` found its incarnation no longer holding the node's sessions.
    func logOnDisconnect(_ op: OnDisconnectOperation, namespace: String, identity: Identity) async throws -> Bool
    /// The onDisconnect bookkeeping this node has applied (nil: the store keeps none).
    var onDisconnectBook: OnDisconnectBook? { get }
}

/// Receives the outcomes of pipelined writes (`PipelinedWriter.enqueue`), each only after its
/// commit is durable, in the order the writes were queued, usually several per call (one call
/// per commit). May run on the store's commit thread: must not block.
public protocol WriteOutcomeSink: AnyObject, Sendable {
    func completed(_ outcomes: [(tag: UInt64, outcome: Result<WriteOutcome, any Error>)])
}

/// One client's writes queued without awaiting each one (the wire protocol's bursts of `p`/`m`
/// requests); their outcomes go to the sink the writer was made with.
public protocol PipelinedWriter: Sendable {
    /// Queues `writes` in order, behind every write queued before. Writes refused at once (bad
    /// input, a full queue) are returned with their errors and write nothing; the outcomes of
    /// the others reach the sink. The tag is the caller's, handed back with the outcome.
    func enqueue(_ writes: [(tag: UInt64, request: WriteRequest)]) -> [(tag: UInt64, error: any Error)]
}

extension DataStore {
    /// Returns once every write answered and every change published on this node is visible to
    /// its reads (a Raft host answers before its apply commits: `EmberStore.released`). The
    /// store's reads wait for that themselves; async fronts call this first so that a read, or a
    /// rules check reading data on an event loop, does not hold a thread while it waits.
    public func visibleReads() async { await storageEngine?.released() }

    /// A pipelined writer when the store has them (`LMDBDataStore` and EmberCluster's
    /// `ReplicatedDataStore` override this); nil: callers await `write` one at a time.
    public func pipelinedWriter(sink: any WriteOutcomeSink) -> (any PipelinedWriter)? { nil }
    public func linearizableBarrier() async throws {}
    public func nodeStatus() async throws -> JSON {
        .object([
            "id": .string("single"), "role": .string("leader"), "term": .int(0), "leader": .string("single"),
            "commitIndex": .int(Int64(appliedIndex)), "appliedIndex": .int(Int64(appliedIndex)),
        ])
    }
    public var memberDirectory: MemberDirectory? { nil }
    public var storageEngine: EmberStore? { nil }
    public var cluster: (any ClusterControl)? { nil }
    public func shutdown() async { close() }
    public func onStateReplaced(_ handler: @escaping @Sendable () -> Void) {}
    public func logOnDisconnect(_ op: OnDisconnectOperation, namespace: String, identity: Identity) async throws -> Bool {
        throw StoreUnavailable("This store keeps no onDisconnect operations")
    }
    public var onDisconnectBook: OnDisconnectBook? { nil }
}

/// ETags are derived from path versions: opaque to clients, cheap to compare at apply time.
public enum ETag {
    public static let null = "null_etag"

    public static func of(node: Node, version: UInt64) -> String {
        node.isEmpty ? null : "v\(version)"
    }
}
