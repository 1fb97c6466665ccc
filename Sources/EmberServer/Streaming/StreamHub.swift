import EmberCore
import Synchronization

/// Registry of open SSE streams and their fan-out. Each stream has a bounded queue: a reader
/// that falls `queueLimit` events behind is closed rather than allowed to grow memory.
public final class StreamHub: Sendable {
    public struct Limits: Sendable {
        /// Open SSE streams per node.
        public var maxStreams: Int = 10_000
        /// Events buffered per stream before it is closed as too slow.
        public var queueLimit: Int = 4096
        public init() {}
    }

    struct Entry: Sendable {
        let namespace: String
        let path: Path
        /// Who opened the stream: a rules change judges its read again.
        let identity: Identity
        let continuation: AsyncStream<(UInt64, String)>.Continuation
    }

    /// Open streams by id, and the same streams by namespace and path (`PathIndex`): a change
    /// visits only the streams at, above and below its path.
    struct Registry {
        var entries: [Int: Entry] = [:]
        var byNamespace: [String: PathIndex<Int, Entry>] = [:]

        mutating func insert(_ id: Int, _ e: Entry) {
            entries[id] = e
            byNamespace[e.namespace, default: PathIndex()].insert(e, for: id, at: e.path)
        }

        mutating func remove(_ id: Int) -> Entry? {
            guard let e = entries.removeValue(forKey: id) else { return nil }
            byNamespace[e.namespace]?.remove(id, at: e.path)
            if byNamespace[e.namespace]?.isEmpty == true { byNamespace.removeValue(forKey: e.namespace) }
            return e
        }
    }

    private let registry = Mutex(Registry())
    /// Streams closed for falling behind; their readers stop at once instead of draining.
    private let overflowed = Mutex<Set<Int>>([])
    private let nextID = Atomic<Int>(0)
    /// Per stream, the newest version of its location its client holds (its initial read's, then
    /// each change sent): a resync after a snapshot install skips a stream whose location's
    /// version did not move, instead of sending the same data again.
    private let seenVersions = Mutex<[Int: UInt64]>([:])
    public let limits: Limits
    /// Set by `closeAll` (the node is stopping): streams not registered here (the pull feed) end
    /// on it, so none holds the HTTP server's graceful shutdown.
    private let closed = Atomic<Bool>(false)
    public var isClosed: Bool { closed.load(ordering: .acquiring) }
    /// Streams closed because their reader fell behind.
    public let overflowClosures = Atomic<Int>(0)

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    public var count: Int { registry.withLock { $0.entries.count } }

    /// Registers a stream; events arrive tagged with their log index so the caller can skip
    /// those already contained in its initial read.
    public func register(namespace: String, path: Path, identity: Identity = .admin) -> (id: Int, events: AsyncStream<(UInt64, String)>)? {
        let (stream, continuation) = AsyncStream<(UInt64, String)>.makeStream(
            bufferingPolicy: .bufferingOldest(limits.queueLimit))
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        let ok = registry.withLock { r -> Bool in
            guard r.entries.count < limits.maxStreams else { return false }
            r.insert(id, Entry(namespace: namespace, path: path, identity: identity, continuation: continuation))
            return true
        }
        guard ok else { return nil }
        return (id, stream)
    }

    /// Adds the namespaces some open stream is on to `namespaces`, read under the lock a stream
    /// registers under before its initial read (the commit feed's check, once per commit:
    /// `CommitFeedPort.onCommit(watched:_:)`).
    func addWatchedNamespaces(to namespaces: inout Set<String>) {
        registry.withLock { r in for ns in r.byNamespace.keys { namespaces.insert(ns) } }
    }

    /// True once a stream was dropped for falling behind (it has a gap and must end).
    public func hasOverflowed(_ id: Int) -> Bool {
        overflowed.withLock { $0.contains(id) }
    }

    /// Forgets a finished stream entirely.
    public func release(_ id: Int) {
        unregister(id)
        overflowed.withLock { _ = $0.remove(id) }
    }

    public func unregister(_ id: Int) {
        let entry = registry.withLock { $0.remove(id) }
        seenVersions.withLock { _ = $0.removeValue(forKey: id) }
        entry?.continuation.finish()
    }

    /// The stream's first event holds its location at `version` (`RestHandler.stream`).
    public func noteInitialRead(id: Int, version: UInt64) {
        seenVersions.withLock { v in if registry.withLock({ $0.entries[id] != nil }) { v[id] = max(v[id] ?? 0, version) } }
    }

    /// Queues a keep-alive on one stream (index `.max` is never skipped by readers).
    public func keepAlive(id: Int) {
        let entry = registry.withLock { $0.entries[id] }
        _ = entry?.continuation.yield((UInt64.max, ChangeRouting.keepAliveText))
    }

    /// Fans a committed change out to the streams it affects, in commit order (called from the
    /// node's `ChangeFeed`). Only the streams the change concerns are visited (`PathIndex`).
    public func publish(_ change: CommittedChange) {
        LatencyMarks.mark(.published, change.index, change.index)
        let targets = registry.withLock { $0.byNamespace[change.namespace]?.matching(change) ?? [] }
        // Encode once per listened location: a stream's events depend only on the change and its
        // path, so streams on the same path get the same text (one JSON serialisation, not one each).
        for (path, streams) in targets {
            let lines = ChangeRouting.events(for: change, at: path).map(ChangeRouting.sseText)
            for (id, entry) in streams { deliver(lines, index: change.index, id: id, entry: entry) }
        }
        // A change raises the version of every location it reaches (changes come in log order).
        seenVersions.withLock { v in
            for (_, streams) in targets { for (id, _) in streams where v[id] != nil { v[id] = max(v[id]!, change.index) } }
        }
    }

    /// Queues a change's texts on one stream; a stream whose queue is full is closed.
    private func deliver(_ lines: [String], index: UInt64, id: Int, entry: Entry) {
        for text in lines {
            if case .dropped = entry.continuation.yield((index, text)) {
                overflowClosures.add(1, ordering: .relaxed)
                overflowed.withLock { _ = $0.insert(id) }
                unregister(id)
                break
            }
        }
    }

    /// Ends a stream whose credential expired, telling the reader why (`auth_revoked`).
    public func revokeAuth(id: Int) {
        let entry = registry.withLock { $0.remove(id) }
        guard let entry else { return }
        _ = entry.continuation.yield((UInt64.max, ChangeRouting.authRevokedText))
        entry.continuation.finish()
    }

    /// SSE `cancel` (REST reference: data null), after which the stream ends.
    static let cancelText = "event: cancel\ndata: null\n\n"

    /// After a rules change: streams of `namespace` whose read is no longer allowed get `cancel`
    /// and end. Called on the commit path, so no event after the change reaches them first.
    func revoke(namespace: String, stillAllowed: (Path, Identity) -> Bool) {
        let streams = registry.withLock { $0.entries.filter { $0.value.namespace == namespace } }
        for (id, entry) in streams.sorted(by: { $0.key < $1.key }) where !stillAllowed(entry.path, entry.identity) {
            _ = entry.continuation.yield((UInt64.max, Self.cancelText))
            unregister(id)
        }
    }

    /// After the node's state was replaced (a follower installed a snapshot): every stream gets
    /// a `put` at "/" of its location's new data, which replaces the client's data (Firebase SSE),
    /// then goes on with later changes; streams no longer allowed to read get `cancel` and end.
    /// Must run after the install and before later changes are published, on a thread that may
    /// read the store. Each put is tagged with its read's index, so a stream whose initial read
    /// already saw the new state skips it (see `RestHandler.stream`).
    func resync(stillAllowed: (String, Path, Identity) -> Bool,
                read: (String, Path) throws -> ReadResult) {
        let streams = registry.withLock { $0.entries }
        // One read per listened location, however many streams share it.
        var reads: KeyMap<ReadResult?> = [:]
        for (id, entry) in streams.sorted(by: { $0.key < $1.key }) {
            guard stillAllowed(entry.namespace, entry.path, entry.identity) else {
                _ = entry.continuation.yield((UInt64.max, Self.cancelText))
                unregister(id)
                continue
            }
            let key = entry.namespace + "|" + entry.path.description
            if reads[key] == nil { reads[key] = .some(try? read(entry.namespace, entry.path)) }
            guard let result = reads[key]!, registry.withLock({ $0.entries[id] != nil }) else {
                // Unreadable now (cannot happen short of a storage failure): end rather than leave
                // the client with the old state.
                unregister(id)
                continue
            }
            // Same version, same data (any change raises it; deletes leave theirs): no repeat.
            let unchanged = seenVersions.withLock { v -> Bool in
                guard let seen = v[id] else { return false }
                v[id] = result.version
                return seen == result.version
            }
            if unchanged { continue }
            let text = ChangeRouting.sseText(.put(path: .root, data: result.node))
            if case .dropped = entry.continuation.yield((result.appliedIndex, text)) {
                overflowClosures.add(1, ordering: .relaxed)
                overflowed.withLock { _ = $0.insert(id) }
                unregister(id)
            }
        }
    }

    public func closeAll() {
        closed.store(true, ordering: .releasing)
        let all = registry.withLock { r -> [Entry] in
            defer { r = Registry() }
            return Array(r.entries.values)
        }
        for e in all { e.continuation.finish() }
    }
}
