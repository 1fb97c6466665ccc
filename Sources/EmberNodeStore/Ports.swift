import EmberCore
import EmberRules

// The node's store as the fronts see it, one port per role (`NodePorts` bundles a node's).
// Each port speaks this module's value types only; EmberStorage stays behind the
// implementations (`LMDBDataStore` for a single node, EmberCluster's `ReplicatedDataStore`).

/// Reads and queries of the node's applied state.
public protocol ReadPort: Sendable {
    /// The last log index applied to this node's state.
    var appliedIndex: UInt64 { get }
    func read(namespace: String, path: Path) throws -> ReadResult
    /// The first `limit` child keys at `path` in key order, without reading the children's
    /// subtrees (`shallow=true` over a large tree costs a seek per child, not a full read).
    /// `after`: only keys after this one (a page of a long child list).
    func shallowKeys(namespace: String, path: Path, after: String?, limit: Int) throws -> [String]
    /// Runs `body` over one consistent snapshot of a namespace, read on demand by rules (so a
    /// rule's `root.child('big').exists()` does not load `big`).
    func withRulesData<T>(namespace: String, _ body: (any RulesDataSource) throws -> T) throws -> T
    /// The JSON of the location streamed from one snapshot as the caller pulls it (`ReadStream`);
    /// nil when this port does not stream (the caller reads whole). Synchronous store work: the
    /// front runs it, and each `next`, on its `ReadPool`.
    /// With `query`: only the children the query selects (same snapshot, same rules as `query`).
    func openReadStream(namespace: String, path: Path, format: TreeJSONFormat, query: QuerySpec?) throws -> (any ReadStream)?
    /// Readies a namespace for `query`: builds its indexes the first time it is queried (which
    /// writes); cheap afterwards. Awaited before the query itself runs on the read pool.
    func prepareQueries(namespace: String) async throws
    /// Runs a query at `path`, reading an index range when one is defined (after `prepareQueries`).
    /// Synchronous store work: the front runs it on its `ReadPool`.
    func query(namespace: String, path: Path, query: QuerySpec) throws -> ReadResult
    /// The `.indexOn` definitions of the node's rules (applied to a namespace when first queried).
    func setIndexes(_ defs: [IndexDefinition]) throws
    /// Returns once every write answered and every change published on this node is visible to
    /// its reads (a Raft host answers before its apply commits). The reads wait for that
    /// themselves; async fronts call this first so that a read, or a rules check reading data on
    /// an event loop, does not hold a thread while it waits.
    func visibleReads() async
    /// Returns once a read on this node reflects every write acknowledged (anywhere) before the
    /// call: REST `?consistency=linearizable`. A single node is always there.
    func linearizableBarrier() async throws
}

/// Client writes, awaited one by one or pipelined.
public protocol WritePort: Sendable {
    func write(_ request: WriteRequest) async throws -> WriteOutcome
    /// A writer for one client's bursts, answering through `sink`; nil: callers await `write`.
    func pipelinedWriter(sink: any WriteOutcomeSink) -> (any PipelinedWriter)?
    /// Whether the nodes a front builds from a text update (`WriteRequest.Kind.updateText`) are
    /// applied: a single node applies them; a cluster logs the text and every member builds its
    /// nodes from it, so there the front only checks the text (`UpdateText.scan`, `buildNodes`).
    var appliesFrontNodes: Bool { get }
}

extension WritePort {
    public var appliesFrontNodes: Bool { true }
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

/// What the commits change, for the listeners' fan-out. Handlers run on the commit path, in log
/// order, after the commit is durable (or, in a cluster, committed by a majority); they must
/// not block.
public protocol CommitFeedPort: Sendable {
    /// Called once per commit with its writes' changes (none empty).
    func onCommit(_ handler: @escaping @Sendable ([CommittedChange]) -> Void)
    /// As `onCommit(_:)`, with only the changes of the namespaces `watched` names: it is asked
    /// once per commit, before any change is built, and a commit none of whose namespaces it
    /// names costs no change and no call (a learner or follower nobody listens to).
    ///
    /// Why skipping is safe: `watched` reads the listener registry under the lock registration
    /// takes, and a listener registers before its initial read. A listener missing from the
    /// answer took that lock after `watched` did, so after the handlers began, which is after
    /// the commit (or, for results released before it, after their release: `EmberStore`'s
    /// `Visibility`, which makes every later read wait for the commit). Its initial read then
    /// holds the skipped change.
    func onCommit(watched: @escaping @Sendable () -> Set<String>, _ handler: @escaping @Sendable ([CommittedChange]) -> Void)
    /// Called with the number of log entries of every storage commit (metrics).
    func onBatchCommitted(_ handler: @escaping @Sendable (_ entries: Int) -> Void)
    /// Called when the whole state was replaced (a cluster follower installed a snapshot), so
    /// listeners cannot be fed a change set and must resynchronise.
    func onStateReplaced(_ handler: @escaping @Sendable () -> Void)
}

/// A namespace's stored security rules: the text as given and its compiled engine.
public struct NamespaceRules: Sendable {
    public let text: String
    public let engine: RulesEngine

    public init(text: String, engine: RulesEngine) {
        self.text = text
        self.engine = engine
    }
}

/// Security rules, replicated like data (a `.setRules` log entry per namespace); writes are
/// judged by them when applied.
public protocol RulesPort: Sendable {
    /// Replaces a namespace's rules through the log (admin). Bad rules: 400 with line and reason.
    func setRules(namespace: String, text: String) async throws
    /// The rules stored for a namespace (committed on this node), if any.
    func storedRules(namespace: String) -> NamespaceRules?
    /// Rules for namespaces without stored rules (the `--rules` file); writes are judged by it.
    func setDefaultRules(_ engine: RulesEngine)
    /// Called (on the commit path, in log order) with the namespace whose rules changed.
    func onRulesChanged(_ handler: @escaping @Sendable (String) -> Void)
}

/// Durable onDisconnect: the bookkeeping lives in the replicated log (`OnDisconnectCommand`).
public protocol OnDisconnectPort: Sendable {
    /// Logs bookkeeping for a session of `namespace`; a `register` carries `identity`, whom the
    /// rules judge its write as when it runs. Returns once applied here; false when a
    /// `register` found its incarnation no longer holding the node's sessions.
    func log(_ command: OnDisconnectCommand, namespace: String, identity: Identity) async throws -> Bool
    /// Node id → the incarnation holding its sessions (as applied on this node).
    func holders() throws -> [String: String]
    /// Sessions with pending writes that pass `include` (asked first with the session's node and
    /// incarnation alone, `id` nil, to skip a whole incarnation), with their namespaces; at most
    /// `limit`.
    func sessions(limit: Int, include: (_ node: String, _ incarnation: String, _ namespace: String?, _ id: String?) -> Bool) throws
        -> [(session: OnDisconnectRef, namespace: String)]
}
