import CLMDB
import EmberCore
import EmberRules
import Foundation
import Synchronization

/// Tunables with named limits. Defaults suit a server; tests shrink them.
public struct StoreOptions: Sendable {
    /// LMDB map size (sparse file; the upper bound of the database size).
    public var mapSize: Int = 64 << 30
    /// Log entries kept after they are applied; older ones are deleted during later writes.
    /// 0: none (`submit` then writes no log rows at all, see `singleNodeLogRetention`).
    public var logRetention: UInt64 = 10_000
    /// A single node's retention: it restarts from its applied state (tree, versions and the
    /// log position in meta) and has no follower to feed, so applied entries are dead weight.
    public static let singleNodeLogRetention: UInt64 = 0
    /// At most this many old log entries are deleted per write transaction.
    public var compactionPerCommit: Int = 4_096
    /// Old log entries are deleted once at least this many are due, not a few in every commit:
    /// a deletion dirties the log's first leaf (and its branch), one or two of the ~6–10 pages a
    /// small commit writes and fsyncs. The log then holds up to `logRetention` plus this many
    /// applied entries. (Retention 0 writes no rows: nothing to batch there.)
    public var compactionMinimum: UInt64 = 512
    /// Group commit: at most this many entries per LMDB transaction… (a commit's page write-out
    /// and fsync cost about the same for 1,024 or 4,096 small writes over a hot key range, so
    /// larger batches raise throughput under load; under light load batches stay small anyway)
    public var maxBatchEntries: Int = 4_096
    /// …and at most about this many encoded bytes.
    public var maxBatchBytes: Int = 32 << 20
    /// Writes waiting for the writer thread; beyond this `submit` throws `.queueFull`.
    public var maxPendingWrites: Int = 16_384
    /// Largest encoded log entry accepted.
    public var maxEntryBytes: Int = 16 << 20
    /// Parts of one multi-path update.
    public var maxUpdateParts: Int = 10_000
    /// Concurrent read transactions.
    public var maxReaders: UInt32 = 512
    /// Buffer of each commit subscription; a subscriber that falls further behind is finished.
    public var subscriptionBuffer: Int = 8_192
    /// false = `MDB_NOSYNC` (not durable; for benchmarks only).
    public var durable: Bool = true
    /// Stored bytes (tree keys with their full paths, plus values) one client read may scan
    /// before it is refused (`StorageError.readTooLarge`). Firebase refuses responses over
    /// 256 MB; a read that large would hold a thread for seconds and gigabytes of memory here.
    /// Writes and rules reads are not limited (they must see the whole old value).
    public var maxReadBytes: Int = 512 << 20
    /// Streamed reads (`TreeStream`) open at once. Each holds a reader slot (of `maxReaders`) and
    /// keeps its snapshot's pages from reuse while its client reads; one more is refused.
    public var maxTreeStreams: Int = 64
    /// Store small objects written whole as one tree record each (`InlineObject`). false writes
    /// the per-leaf format of before (both are always read; tests use it for old directories).
    public var inlineObjects: Bool = true
    /// A bulk write puts its tree records in key order with MDB_APPEND past the table's end
    /// (full pages; `Applier.putRecords`). false puts each object's records in its children's
    /// map order, plainly (before issue 42's cut): the same rows, about half-full pages. For
    /// tests that compare the two.
    public var orderedRecords: Bool = true
    /// A text update (`updateText`) that needs no node (no index, trigger or evaluated rule in
    /// its namespace) writes the records of each part over nothing straight from its text, and
    /// its answer is built from the text when read (`Applier.writeText`, issue 42). false:
    /// every part's node is built, as before. For tests that compare the two.
    public var textRecords: Bool = true
    /// Point-in-time archive (`Archiver`): the log keeps applied entries the archive does not
    /// hold yet (`ArchiveMark`), at most this many behind the applied index; past it they are
    /// compacted anyway and the archiver reports the gap. 0: no archive (nothing is held).
    public var archiveHold: UInt64 = 0
    /// `archiveHold` of a node that archives.
    public static let defaultArchiveHold: UInt64 = 1_000_000
    /// Where the current boot's id is read (`LazySync`: a learner's commits without a data sync
    /// are made only where a machine restart can be told from a process restart).
    public var bootIDPath = "/proc/sys/kernel/random/boot_id"
    /// A single node that archives (`archiveHold` > 0, `logRetention` 0, `submit` only) keeps
    /// its rows in a ring of small tables, each emptied whole once archived (`LogRing`), not
    /// deleted row by row.
    public var alternatingLog = false
    /// A cluster member keeping its log (`logRetention` > 0) stores a trigger group's record
    /// of locations a write created whole compact, rebuilt from the log entry when read
    /// (`TriggerCompactRecord`). false: every record full (the same records once expanded;
    /// tests compare the two).
    public var compactTriggerRecords = true
    /// Leaves at which the ring's current table turns (`LogRing`): a root of 8-byte keys holds
    /// ~226 children, so below it a table keeps two levels.
    public var logTurnLeafPages = 192

    public init() {}
}

/// Counters for metrics.
public struct StorageMetrics: Sendable, Equatable {
    /// LMDB write transactions committed (any kind).
    public var commits: UInt64 = 0
    /// Log entries applied and committed.
    public var entriesCommitted: UInt64 = 0
    /// Group-commit batches of `submit` writes and the largest / latest batch.
    public var batches: UInt64 = 0
    public var maxBatchEntries: Int = 0
    public var lastBatchEntries: Int = 0
    public var batchBytes: UInt64 = 0
    /// Submits rejected because the queue was full.
    public var queueRejections: UInt64 = 0
    public var pendingWrites: Int = 0
    /// Log entries removed by compaction.
    public var compactedEntries: UInt64 = 0
    /// Compact trigger change records made full because compaction deleted their entries
    /// (`TriggerChangeLog.expandCompacted`): each one a record written twice.
    public var triggerRecordsExpanded: UInt64 = 0
    /// Index entries visited by indexed queries (shows that a limited query reads few).
    public var queryIndexEntriesScanned: UInt64 = 0
    /// Writer time inside write transactions before their commit (applying entries), and inside
    /// `mdb_txn_commit` (writing the dirty pages out and syncing them), in nanoseconds: tells
    /// whether throughput is bound by the CPU or by the disk.
    public var transactionNanos: UInt64 = 0
    public var commitNanos: UInt64 = 0
    /// The writer thread's CPU time in the same two phases (wall time above minus waiting for
    /// the disk and for a core).
    public var transactionCPUNanos: UInt64 = 0
    public var commitCPUNanos: UInt64 = 0
    /// A learner's commits made without a data sync (`LazySync`), the interval syncs that made
    /// them durable, and the interval syncs that failed (retried at the next interval).
    public var lazyCommits: UInt64 = 0
    public var lazySyncs: UInt64 = 0
    public var lazySyncFailures: UInt64 = 0
    /// Transactions redone with one nested transaction per entry because an entry threw while
    /// they were applied flat (see `Writer.ApplyMode`).
    public var nestedRetries: UInt64 = 0
}

/// Raft hard state.
public struct HardState: Sendable, Equatable {
    public var term: UInt64
    public var votedFor: String?
    public init(term: UInt64, votedFor: String?) { self.term = term; self.votedFor = votedFor }
}

/// LMDB-backed durable storage of many JSON trees (namespaces), where every write is a log entry.
///
/// Concurrency: reads are synchronous and run on the caller's thread in their own read-only
/// transaction (`MDB_NOTLS`), so any number run in parallel with the writer and see a consistent
/// committed snapshot. All writes go to one dedicated writer thread (LMDB write transactions must
/// begin and commit on one thread and we never `await` inside one). `submit` calls queue there
/// and are group-committed: one transaction, one fsync, for up to `maxBatchEntries` writes.
///
/// Durability: a write's continuation is resumed only after `mdb_txn_commit` returned, i.e. after
/// the log entry, the tree, versions, indexes and the applied index are on disk together.
///
/// `@unchecked Sendable`: the environment and database handles are immutable after `init` and
/// LMDB allows them on any thread; write transactions are confined to the writer thread; the
/// mutable shared state is in `Mutex`es.
public final class EmberStore: @unchecked Sendable {
    public let directory: String
    public var options: StoreOptions { core.options }
    let core: StoreCore
    var env: OpaquePointer { core.env }
    var tables: Tables { core.tables }
    var wake: DispatchSemaphore { core.wake }
    typealias Job = StoreCore.Job
    typealias Submission = StoreCore.Submission
    let nextSubscriber = Atomic<UInt64>(0)
    /// Shared change records decoded for the delivery lanes (`TriggerRecordCache`).
    var triggerRecords: TriggerRecordCache { core.triggerRecords }
    /// Held (shared) while open, so `compact` refuses a directory a node is using.
    let directoryLock: DirectoryLock
    /// Objects of a former layout rewritten as inline records when this store opened (`Reinline`).
    public private(set) var objectsInlinedOnOpen = 0
    /// Keys rewritten into the format-3 text order when this store opened (`TextOrderMigration`).
    public private(set) var textKeysMigratedOnOpen = 0
    /// Whether the indexes were rebuilt under location ids when this store opened (`IndexLocations`).
    public private(set) var indexesRebuiltOnOpen = false

    /// Opens (creating if needed) the store in `directory`. Opening does not replay the log:
    /// the tree and the applied index are already durable.
    public init(directory: String, options: StoreOptions = StoreOptions()) throws {
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        directoryLock = try DirectoryLock(directory: directory, exclusive: false)
        // A defrag cut short (kill -9) leaves its copy and links: the data file is whole either way.
        Defrag.removeLeftovers(in: directory)
        // Before LMDB reads a file a machine crash may have left inconsistent.
        let lazySync = try LazySync.load(directory: directory, bootIDPath: options.bootIDPath)
        let e = try openEnvironment(directory, mapSize: options.mapSize, flags: options.durable ? 0 : flag(MDB_NOSYNC),
                                    maxReaders: options.maxReaders)
        var t: OpaquePointer?
        let tables: Tables
        do {
            try check(mdb_txn_begin(e, nil, 0, &t))
            tables = try Tables.open(t!, inlineObjects: options.inlineObjects, orderedRecords: options.orderedRecords,
                                    textRecords: options.textRecords)
            try tables.markStorageFormat(Txn(ptr: t!))
            _ = try Tables.dropLegacyTables(t!)
            try tables.noteOverflowRows(Txn(ptr: t!))
            // Shared change records of a format-6 directory move to their table (once).
            try TriggerRecordRows.migrate(tables, Txn(ptr: t!))
            // Triggers of a 0.6.0 directory join their shared change records (once).
            try TriggerChangeLog.migrate(tables, Txn(ptr: t!))
            let opened = t
            t = nil  // commit frees the transaction, failing or not
            try check(mdb_txn_commit(opened))
            // Keys of a directory from before storage format 3 get the UTF-16 text order, once.
            textKeysMigratedOnOpen = try TextOrderMigration.migrate(e, tables)
            // Index rows of a directory from before storage format 4 go under location ids, once.
            indexesRebuiltOnOpen = try IndexLocations.migrate(e, tables)
            // Small objects a former version stored per leaf become inline records, once.
            if options.inlineObjects { objectsInlinedOnOpen = try Reinline.migrate(e, tables) }
        } catch {
            if t != nil { mdb_txn_abort(t) }
            mdb_env_close(e)
            throw error
        }
        core = StoreCore(env: EnvHandle(env: e, link: nil), tables: tables, options: options, directory: directory,
                         lazySyncEnabled: lazySync.enabled && options.durable)
        let w = Writer(core: core)
        w.lazySync = lazySync
        w.publishLazySyncOwed()  // a marker left by a process crash in this boot: removed when idle
        do {
            try w.load()
            try StagingImport.run(core, writer: w, directory: directory)
        } catch { core.environment.withLock { $0 }.close(); throw error }
        // The writer's counters' path is known once its thread runs: set before `init` returns,
        // so a caller's first `writerThreadIO` already reads them.
        let started = DispatchSemaphore(value: 0)
        let thread = Thread { [w, core = self.core] in
            core.writerIOPath.withLock { $0 = ThreadIO.callingThreadPath() }
            started.signal()
            w.run()
        }
        thread.name = "ember-storage-writer"
        thread.start()
        started.wait()
    }

    deinit {
        close()
    }

    /// Stops the writer (after the queued writes) and closes the environment. Reads must not be
    /// running or started afterwards.
    public func close() {
        guard !core.isClosed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        core.queue.withLock { $0.pending.append(.stop) }
        wake.signal()
        core.stopped.wait()
        core.streams.closeAll()  // their read transactions end before the environment closes
        for c in core.subscribers.withLock({ s in defer { s.removeAll() }; return Array(s.values) }) { c.finish() }
        core.environment.withLock { $0 }.close()
        directoryLock.release()
    }

    /// Flushes every committed transaction to disk: the one sync of a store opened with
    /// `durable: false` whose whole result is kept only once complete (`ember restore --archive`).
    public func syncToDisk() throws {
        try check(mdb_env_sync(env, 1))
    }

    // MARK: - Status

    public var appliedIndex: UInt64 { core.published.withLock { $0.applied } }
    public var lastLogIndex: UInt64 { core.published.withLock { $0.lastIndex } }
    public var lastLogTerm: UInt64 { core.published.withLock { $0.lastTerm } }
    /// First index still in the log (entries below were compacted).
    public var firstLogIndex: UInt64 { core.published.withLock { $0.firstIndex } }
    public var metrics: StorageMetrics {
        var m = core.metricsState.withLock { $0 }
        m.pendingWrites = core.queue.withLock { $0.pending.count }
        m.queryIndexEntriesScanned = core.indexEntriesScanned.load(ordering: .relaxed)
        return m
    }

    // MARK: - Reads

    func withRead<T>(_ body: (Txn) throws -> T) throws -> T { try core.withRead(body) }

    /// The value at `path` and its version, from one consistent snapshot.
    public func read(namespace: String, path: Path) throws -> (node: Node, version: UInt64) {
        try KeyCodec.validateNamespace(namespace)
        return try withVisibleRead { t in
            (try tables.readNode(t, key: Tables.treeKey(namespace, path), maxBytes: options.maxReadBytes),
             try tables.version(t, namespace, path))
        }
    }

    /// Like `read`, plus the applied index of the same snapshot (what a listener's initial data
    /// reflects; later changes come from the commit stream).
    public func readSnapshot(namespace: String, path: Path) throws -> (node: Node, version: UInt64, applied: UInt64) {
        try KeyCodec.validateNamespace(namespace)
        return try withVisibleRead { t in
            (try tables.readNode(t, key: Tables.treeKey(namespace, path), maxBytes: options.maxReadBytes),
             try tables.version(t, namespace, path), try tables.metaU64(t, "applied"))
        }
    }

    public func version(namespace: String, path: Path) throws -> UInt64 {
        try KeyCodec.validateNamespace(namespace)
        return try withVisibleRead { t in try tables.version(t, namespace, path) }
    }

    /// The version of the data at `path`, nil when there is none (what REST's ETag is made of).
    public func dataVersion(namespace: String, path: Path) throws -> UInt64? {
        try KeyCodec.validateNamespace(namespace)
        return try withVisibleRead { t in
            try tables.exists(t, key: Tables.treeKey(namespace, path)) ? try tables.version(t, namespace, path) : nil
        }
    }

    public func exists(namespace: String, path: Path) throws -> Bool {
        try KeyCodec.validateNamespace(namespace)
        return try withVisibleRead { t in try tables.exists(t, key: Tables.treeKey(namespace, path)) }
    }

    /// Child keys in key order without reading the children's subtrees (one seek per child).
    /// `after`: only the keys after it (the next page of a long list).
    public func shallowKeys(namespace: String, path: Path, after: String? = nil, limit: Int = .max) throws -> [String] {
        try KeyCodec.validateNamespace(namespace)
        // Past a child's subtree: its key, then a byte above every segment encoding (as childKeys steps).
        let start = try after.map { try Tables.treeKey(namespace, path.child($0)) + [0xFF] }
        return try withVisibleRead { t in try tables.childKeys(t, base: Tables.treeKey(namespace, path), from: start, limit: limit) }
    }

    public func childCount(namespace: String, path: Path) throws -> Int {
        try shallowKeys(namespace: namespace, path: path).count
    }

    /// The `.indexOn` specs of a namespace.
    public func indexSpecs(namespace: String) throws -> [IndexSpec] {
        try KeyCodec.validateNamespace(namespace)
        let defs = try withRead { t in try tables.indexDefs(t, namespace) }
        var out: [IndexSpec] = []
        for d in defs {
            if let i = out.firstIndex(where: { $0.location == d.patternText }) {
                out[i].indexes.append(d.index)
            } else {
                out.append(try IndexSpec(location: d.patternText, indexes: [d.index.wireName]))
            }
        }
        return out
    }

    /// Whether queries at `path` ordered by `index` are served by an index (`.key` and
    /// `.priority` always are, from the tree).
    public func hasIndex(namespace: String, path: Path, index: QueryIndex) throws -> Bool {
        switch index {
        case .key, .priority: return true
        default:
            try KeyCodec.validateNamespace(namespace)
            return try withRead { t in try tables.indexDefs(t, namespace).contains { $0.index == index && $0.matches(path) } }
        }
    }

    // MARK: - Writes

    /// Validates a write before it reaches the log; bad input never writes anything. Returns the
    /// size of its encoded log entry.
    public func validate(namespace: String, operation: WriteOperation) throws -> Int {
        try prepare(namespace: namespace, operation: operation, buildNodes: false, encode: false).size
    }

    /// `validate`, returning the checked write's log entry (index, term and timestamp 0, for
    /// the leader to stamp): a cluster node checks and encodes a client write in one pass.
    /// The values are checked without building their nodes: every replica builds them from the
    /// entry when it applies it (building them here too was ~a fifth of a cluster leader's CPU
    /// in a bulk import, issue 42).
    public func validatedEntry(namespace: String, operation: WriteOperation, auth: WriteAuth,
                               writer: WriterStamp?) throws -> [UInt8] {
        try prepare(namespace: namespace, operation: operation, auth: auth, writer: writer, buildNodes: false, encode: true).encoded!
    }

    /// `validatedEntry` with the entry it encoded (index, term and timestamp 0): what decoding
    /// the encoding gives, so a Raft leader appends its own client's write from it instead of
    /// decoding a bulk import's MBs again on its loop (the values are the request's, shared).
    /// `textChecked`: a text update its front's scan checked (`UpdateText.scan`: the same checks),
    /// so it is not walked again here.
    public func validatedLogEntry(namespace: String, operation: WriteOperation, auth: WriteAuth,
                                  writer: WriterStamp?, textChecked: Bool = false) throws -> (encoded: [UInt8], entry: LogEntry) {
        let encoded = try prepare(namespace: namespace, operation: operation, auth: auth, writer: writer, buildNodes: false,
                                  encode: true, textChecked: textChecked).encoded!
        return (encoded, LogEntry(index: 0, term: 0, namespace: namespace, operation: operation, timestamp: 0, auth: auth, writer: writer))
    }

    /// The one full check of a write (keys, depth, sizes, server values),
    /// keeping what it computed so the writer does not redo it: the encoded entry (when `encode`;
    /// by default when the writer will store it: `keepsLog`), its size and, when the write holds
    /// no server values and `buildNodes`, the nodes to write.
    /// `built`: a text update's nodes as its front built them from that very text while it
    /// checked it (`UpdateText.scan`): taken instead of building them again.
    func prepare(namespace: String, operation: WriteOperation, auth: WriteAuth = .admin, writer: WriterStamp? = nil,
                 buildNodes: Bool = true, encode: Bool? = nil, built: [Node]? = nil,
                 textChecked: Bool = false) throws -> PreparedWrite {
        let nodes = try checkOperation(namespace: namespace, operation: operation, buildNodes: buildNodes, built: built,
                                       textChecked: textChecked)
        let entry = LogEntry(index: 0, term: 0, namespace: namespace, operation: operation, timestamp: 0, auth: auth, writer: writer)
        let encoded = (encode ?? keepsLog) ? entry.encoded() : nil
        let size = encoded?.count ?? entry.encodedSize()
        try checkSize(size)
        return PreparedWrite(encoded: encoded, size: size, nodes: nodes)
    }

    /// Whether `submit`s write their log entries (`Writer.runBatch`): with a retention, or while
    /// the archive holds entries. Else an entry is only counted, never encoded.
    var keepsLog: Bool { options.logRetention > 0 || options.archiveHold > 0 }

    /// The checks of `prepare` for an entry that arrives encoded (a write forwarded to the
    /// leader): its size is the size it arrived with, so it is not encoded again.
    public func validate(entry: LogEntry, encodedBytes: Int) throws {
        _ = try checkOperation(namespace: entry.namespace, operation: entry.operation, buildNodes: false)
        try checkSize(encodedBytes)
    }

    private func checkSize(_ bytes: Int) throws {
        guard bytes <= options.maxEntryBytes else {
            throw StorageError.entryTooLarge(bytes: bytes, limit: options.maxEntryBytes)
        }
    }

    /// Everything but the entry's size; returns the nodes to write when the write holds no
    /// server values (those are resolved at apply time) and `buildNodes` (else values are only
    /// checked, by `Node.validate`: the same errors as building them).
    private func checkOperation(namespace: String, operation: WriteOperation, buildNodes: Bool = true, built: [Node]? = nil,
                                textChecked: Bool = false) throws -> [Node]? {
        try KeyCodec.validateNamespace(namespace)
        var nodes: [Node]? = buildNodes ? [] : nil
        func checkValue(_ path: Path, _ json: JSON) throws {
            do throws(EmberError) {
                if nodes != nil {
                    // Built at once: a value that builds holds no server value (`Node(json:)`
                    // refuses every `.sv` it reaches), so the walk looking for one runs only
                    // when the build fails (~a sixth of this check's time in a bulk import).
                    // A value without one throws what it threw before.
                    let built: Node?
                    do throws(EmberError) {
                        built = try Node(json: json, depth: path.count)
                    } catch {
                        if !ServerValues.containsPlaceholder(json) { throw error }
                        built = nil
                    }
                    if let built {
                        nodes!.append(built)
                        return
                    }
                }
                if ServerValues.containsPlaceholder(json) {
                    // Resolved again at apply time against the data there (with the entry's time).
                    _ = try Node(json: try ServerValues.resolve(json, existing: .empty, now: 0), depth: path.count)
                    nodes = nil
                } else {
                    _ = try Node.validate(json: json, depth: path.count)
                }
            } catch { throw StorageError.invalid(error) }
        }
        switch operation {
        case .noop, .archived: nodes = nil
        case .setRules(let text): nodes = nil; _ = try StoredRules(text: text)
        case .triggers(let op): nodes = nil; try Self.checkTriggers(op)
        case .onDisconnect(let op):
            nodes = nil
            if case .register = op, namespace == OnDisconnectTable.namespace {
                throw StorageError.invalid(.invalidData("onDisconnect writes cannot target a reserved namespace"))
            }
            guard op.names.allSatisfy(OnDisconnectSession.isValidName) else {
                throw StorageError.invalid(.invalidData("onDisconnect names are 1-\(OnDisconnectSession.maxNameBytes) characters of A-Z a-z 0-9 - _ ."))
            }
            if case .register(_, let write) = op {
                guard OnDisconnectOperation.isRegistrable(write) else {
                    throw StorageError.invalid(.invalidData("onDisconnect registers an unconditional set or update"))
                }
                // The write is checked as it will be applied when it runs (the entry holding it
                // is at least as large, so its size is checked with that entry's).
                _ = try checkOperation(namespace: namespace, operation: write, buildNodes: false)
            }
        case .set(let p, let v, _): try checkValue(p, v)
        case .update(let p, let parts, _):
            guard parts.count <= options.maxUpdateParts else {
                throw StorageError.invalid(.tooLarge("An update may have at most \(options.maxUpdateParts) paths"))
            }
            if let (a, b) = Self.nestedPair(parts.map(\.0)) {
                throw StorageError.invalid(.invalidData("Path \(p.appending(a)) is an ancestor of \(p.appending(b)) in the same update"))
            }
            for (rel, v) in parts { try checkValue(p.appending(rel), v) }
        case .updateText(let p, let text, _):
            guard text.count <= options.maxUpdateParts else {
                throw StorageError.invalid(.tooLarge("An update may have at most \(options.maxUpdateParts) paths"))
            }
            if let (a, b) = Self.nestedPair(text.parts.map(\.path)) {
                throw StorageError.invalid(.invalidData("Path \(p.appending(a)) is an ancestor of \(p.appending(b)) in the same update"))
            }
            if let built {
                precondition(built.count == text.count, "one built node per part")
                return buildNodes ? built : nil
            }
            if textChecked && !buildNodes { return nil }
            // Building a part from its text is its check (no server value can be in it: the
            // build refuses one, as `Node(json:)` does).
            for i in 0..<text.count {
                do throws(EmberError) {
                    let node = try text.node(i, depth: p.count + text.parts[i].path.count)
                    nodes?.append(node)
                } catch { throw StorageError.invalid(error) }
            }
        }
        return nodes
    }

    /// Two of an update's paths where the first is the second or an ancestor of it (in key
    /// order an ancestor comes right before its descendants), or nil when none nests in another.
    static func nestedPair(_ paths: [Path]) -> (Path, Path)? {
        // The fronts hand their updates' paths over in order (`WriteValidation.updateParts`):
        // one look then, instead of a sort comparing paths key by key.
        let sorted = zip(paths, paths.dropFirst()).allSatisfy({ $0.0 < $0.1 }) ? paths : paths.sorted()
        return zip(sorted, sorted.dropFirst()).first { $0.0.contains($0.1) }
    }

    /// Leader-less single-node write: validates, queues for group commit, assigns the next log
    /// index and the current term, and returns after the commit is durable. `auth` is who the
    /// rules judge the entry as, when it is applied. `built`: a text update's nodes as its front
    /// built them (`prepare`).
    public func submit(namespace: String, _ operation: WriteOperation, auth: WriteAuth = .admin,
                       writer: WriterStamp? = nil, built: [Node]? = nil) async throws -> WriteResult {
        let prepared = try prepare(namespace: namespace, operation: operation, auth: auth, writer: writer, built: built)
        return try await withCheckedThrowingContinuation { cont in
            let (err, wake): (StorageError?, Bool) = core.queue.withLock { q in
                if q.closed { return (.closed, false) }
                if q.pending.count >= options.maxPendingWrites { return (.queueFull(limit: options.maxPendingWrites), false) }
                q.pending.append(.submit(Submission(namespace: namespace, operation: operation, auth: auth, writer: writer,
                                                    prepared: prepared, completion: .resume(cont))))
                return (nil, q.takeWake())
            }
            if let err {
                if case .queueFull = err { core.metricsState.withLock { $0.queueRejections += 1 } }
                cont.resume(throwing: err)
            } else if wake {
                self.wake.signal()
            }
        }
    }

    /// Runs `body` on the writer thread (not group-committed with submits).
    func perform<T: Sendable>(_ body: @escaping @Sendable (Writer) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (cont: CheckedContinuation<T, any Error>) in
            let queued = enqueueExclusive { w in
                do { cont.resume(returning: try body(w)) } catch { cont.resume(throwing: error) }
            }
            if !queued { cont.resume(throwing: StorageError.closed) }
        }
    }

    /// Queues `job` for the writer thread and wakes it; false (nothing queued) once closed.
    func enqueueExclusive(_ job: @escaping @Sendable (Writer) -> Void) -> Bool {
        core.enqueueExclusive(job)
    }

    /// Replaces the `.indexOn` specs of a namespace: new indexes are built from the data, removed
    /// ones dropped, in one transaction. Local configuration (not a log entry).
    public func setIndexes(namespace: String, _ specs: [IndexSpec]) async throws {
        try KeyCodec.validateNamespace(namespace)
        var defs: [IndexDef] = []
        for s in specs { for d in s.defs where !defs.contains(d) { defs.append(d) } }
        guard defs.count <= IndexSpec.maxIndexesPerNamespace else {
            throw StorageError.tooManyIndexes(limit: IndexSpec.maxIndexesPerNamespace)
        }
        let newDefs = defs
        try await perform { w in try w.setIndexes(namespace: namespace, newDefs) }
    }

    // MARK: - Rules

    /// The rules stored for `namespace` by a `.setRules` entry (committed), if any.
    public func storedRules(namespace: String) -> StoredRules? {
        core.storedRules.withLock { $0[namespace] }
    }

    /// The rules writes in namespaces without stored rules are judged by (nil: open). Local
    /// configuration: give every replica the same.
    public func setDefaultRules(_ engine: RulesEngine?) {
        core.defaultRules.withLock { $0 = engine }
    }

    /// The rules in force for `namespace`: stored, else the default; nil = open.
    public func effectiveRules(namespace: String) -> RulesEngine? {
        storedRules(namespace: namespace)?.engine ?? core.defaultRules.withLock { $0 }
    }

    // MARK: - Commit subscription

    /// Registers a handler called with every committed batch of results, in log order, on the
    /// writer thread after the commit and BEFORE the batch's submitters resume. So a listener fed
    /// from here has seen a write before its writer is acknowledged. It must not block.
    public func onCommit(_ handler: @escaping @Sendable ([WriteResult]) -> Void) {
        core.commitHandlers.withLock { $0.append(handler) }
    }

    /// Results of every applied log entry (submits and Raft applies), in log order, yielded on the
    /// writer thread right after the commit. The buffer holds `options.subscriptionBuffer`
    /// results; a subscriber that falls further behind has its stream finished (it lost events
    /// and must resynchronise by reading).
    public func commits() -> AsyncStream<WriteResult> {
        let id = nextSubscriber.add(1, ordering: .relaxed).newValue
        let (stream, cont) = AsyncStream<WriteResult>.makeStream(bufferingPolicy: .bufferingOldest(options.subscriptionBuffer))
        // Captures the core, not the store: this may run on the writer thread, which must never
        // hold the last reference to the store (its deinit waits for the writer).
        cont.onTermination = { [core] _ in _ = core.subscribers.withLock { $0.removeValue(forKey: id) } }
        core.subscribers.withLock { $0[id] = cont }
        return stream
    }

}
