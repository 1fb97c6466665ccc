import CLMDB
import EmberCore
import Foundation

/// The writer thread's state. Confined to that thread (every method runs there, from `run` or
/// from an `exclusive` job); `@unchecked Sendable` only so jobs can name it in their closures.
final class Writer: @unchecked Sendable {
    let store: StoreCore
    let tables: Tables
    var applied: UInt64 = 0
    var appliedTerm: UInt64 = 0
    var lastIndex: UInt64 = 0
    var lastTerm: UInt64 = 0
    var firstIndex: UInt64 = 1
    var term: UInt64 = 0
    var votedFor: String?
    var lastTimestamp: Int64 = 0
    var defsCache: [String: [IndexDef]] = [:]
    /// Stored rules per namespace (the default comes from `StoreCore.defaultRules` per batch).
    var storedRules: [String: StoredRules] = [:]
    /// Trigger definitions per namespace (`Applier.triggers`).
    var storedTriggers: [String: TriggerSet] = [:]
    /// Set while a flat transaction runs (`withApplyRetry`).
    var pendingVersions: PendingVersions?
    /// Set while a flat transaction runs (`withApplyRetry`): the trigger record streams' ends.
    var triggerTails: TriggerTails?
    /// Set while a cluster member applies logged entries (`applyBatch`) with the log kept
    /// (`StoreOptions.logRetention` > 0): its Appliers may store compact trigger records
    /// (`Applier.compactTriggers`).
    var compactTriggers = false
    /// The trigger groups whose streams the last log compaction found records in that it had to
    /// keep (`TriggerChangeLog.Expansion.behind`): a paused or slow trigger's. Their records
    /// are stored full (`Applier.fullTriggerGroups`), not compact then expanded when their
    /// entries leave the log: a second write of every record, and a decode of its entry, on
    /// every member. A hint of this member's only (either form is the same record).
    var triggerGroupsBehind: Set<TriggerTails.Key> = []
    /// The records the last flat transaction appended (`TriggerTails.records`); nil after a
    /// nested one, or when no delivery lane reads before commits (`TriggerReleases`).
    var releasedRecords: [TriggerReleases.Record]?
    /// Appended, unapplied entries as decoded when appended (`DecodedTail`).
    var decoded = DecodedTail()
    /// Set during a releasing job (`EmberStore.performReleasing`): `writeTxn` leaves its
    /// transaction in `pending` instead of committing it.
    var releasing = false
    var pending: PendingCommit?
    /// False while an idle apply runs: its commits skip the meta page's sync (`applyCommitted`).
    var metaSync = true
    /// False while a learner's lazily synced apply runs: its commits skip the data sync too
    /// (`LazySync`, `applyUnlogged`).
    var dataSync = true
    /// The commits made without a data sync and their marker (`LazySync`).
    var lazySync = LazySync(markerPath: "", bootID: nil, markerPresent: false)
    /// Set while an online defrag copies the environment: the keys written meanwhile.
    var recording: ChangedKeys?
    /// Indexes at which a caller waits for the state (`EmberStore.statePoint`).
    var hashPoints = HashPoints()
    /// The file's end (last page number) after the previous commit, so `releaseFreedPages` sees
    /// a commit that grew it.
    var fileEnd: Int = -1

    init(core: StoreCore) {
        self.store = core
        self.tables = core.tables
    }

    func load() throws {
        try store.withRead { t in
            applied = try tables.metaU64(t, "applied")
            appliedTerm = try tables.metaU64(t, "appliedTerm")
            lastIndex = try tables.metaU64(t, "lastIndex")
            lastTerm = try tables.metaU64(t, "lastTerm")
            firstIndex = max(1, try tables.metaU64(t, "firstIndex"))
            term = try tables.metaU64(t, "term")
            votedFor = try t.get(tables.meta, Array("votedFor".utf8)).map { String(decoding: $0, as: UTF8.self) }
            lastTimestamp = Int64(bitPattern: try tables.metaU64(t, "lastTimestamp"))
            storedRules = try StoredRules.loadAll(tables, t)
            storedTriggers = try tables.allTriggerSets(t)
        }
        publishRules()
        publishState()
    }

    /// Makes the committed rules visible to readers (before the batch's results are published,
    /// so a rules-change handler sees the new rules).
    func publishRules() {
        store.storedRules.withLock { $0 = storedRules }
    }

    func rulesState() -> RulesState {
        RulesState(stored: storedRules, defaultEngine: store.defaultRules.withLock { $0 })
    }

    func publishState() {
        store.published.withLock {
            $0 = StoreCore.Published(applied: applied, lastIndex: lastIndex, lastTerm: lastTerm, firstIndex: firstIndex)
        }
        settleHashPoints()
    }

    // MARK: - Loop

    func run() {
        // Its reads never wait for its own pending commit.
        Visibility.neverWaitOnThisThread()
        while true {
            store.wake.wait()
            while true {
                var jobs: [StoreCore.Job] = store.queue.withLock { q in
                    guard let first = q.pending.first else {
                        q.writerIdle = true
                        return []
                    }
                    guard case .submit = first else {
                        q.pending.removeFirst()
                        if case .stop = first { q.closed = true }
                        return [first]
                    }
                    var n = 0, bytes = 0
                    while n < q.pending.count, n < store.options.maxBatchEntries, bytes < store.options.maxBatchBytes,
                          case .submit(let sub) = q.pending[n] {
                        bytes += sub.prepared.size
                        n += 1
                    }
                    if n == q.pending.count {
                        // The usual case: take the whole queue without copying or shifting it.
                        defer { q.pending = [] }
                        return q.pending
                    }
                    let taken = Array(q.pending[0..<n])
                    q.pending.removeFirst(n)
                    return taken
                }
                if jobs.isEmpty { break }
                switch jobs[0] {
                case .stop:
                    // Fail whatever was queued behind the stop.
                    let rest = store.queue.withLock { q in defer { q.pending.removeAll() }; return q.pending }
                    for j in rest {
                        if case .submit(let sub) = j { sub.completion.fail(StorageError.closed) }
                        if case .exclusive(let f) = j { f(self) }  // fails in `perform` with a closed env? run it: env still open
                    }
                    finishLazySync()
                    store.stopped.signal()
                    return
                case .exclusive(let f):
                    f(self)
                case .submit:
                    runBatch(&jobs)
                }
            }
        }
    }

    static func logKey(_ i: UInt64) -> [UInt8] {
        var w = ByteWriter()
        w.u64(i)
        return w.bytes
    }

    /// How a transaction applies its entries. `.flat`: straight into the batch's transaction —
    /// the fast path, since a nested LMDB transaction copies every page it touches from its parent
    /// and merges its dirty list back on commit (~1 µs per small write); but an entry that throws
    /// there may leave partial changes, so the whole transaction is aborted and redone `.nested`,
    /// where each entry has its own nested transaction and an apply-time failure rejects that
    /// entry only. Entries that are denied or fail their condition throw nothing and write nothing
    /// in either mode (`Applier.apply` decides before its first put).
    enum ApplyMode { case flat, nested }

    /// Runs `body` (one whole write transaction) `.flat`; if it throws, restores the writer's
    /// per-transaction caches and runs it again `.nested`. When that throws too, the caches are
    /// restored again (the transaction left nothing behind) and the error is rethrown.
    func withApplyRetry<T>(_ body: (ApplyMode) throws -> T) throws -> T {
        let saveDefs = defsCache, saveRules = storedRules, saveTriggers = storedTriggers
        releasedRecords = nil
        do {
            pendingVersions = PendingVersions()
            triggerTails = TriggerTails(collecting: store.triggerReleases.active)
            defer { pendingVersions = nil; triggerTails = nil }
            let r = try body(.flat)
            releasedRecords = triggerTails?.records
            return r
        } catch {
            defsCache = saveDefs
            storedRules = saveRules
            storedTriggers = saveTriggers
            store.metricsState.withLock { $0.nestedRetries += 1 }
        }
        do {
            return try body(.nested)
        } catch {
            defsCache = saveDefs
            storedRules = saveRules
            storedTriggers = saveTriggers
            throw error
        }
    }

    /// Runs `body` with one `Applier` for the flat transaction `t` (`replaying`: in the
    /// restore-only replay mode, `Applier.replaying`): the Applier's set-up (the rules state
    /// read under its lock, the caches copied in and out) is then per batch. An entry's rules,
    /// index or trigger change is seen by the entries after it through the same `Applier`; the
    /// caches are the writer's again once `body` returns (when it throws, `withApplyRetry`
    /// restores them anyway).
    func withFlatApplier<T>(_ t: Txn, replaying: Bool = false, _ body: (inout Applier) throws -> T) throws -> T {
        var ap = Applier(tables: tables, txn: t, defsCache: defsCache, rules: rulesState(), pending: pendingVersions,
                         triggers: storedTriggers, tails: triggerTails)
        ap.replaying = replaying
        ap.compactTriggers = compactTriggers && !replaying
        ap.fullTriggerGroups = triggerGroupsBehind
        // Closed before the transaction ends (LMDB frees its cursors then).
        let cursors = replaying ? ReplayCursors(t, tables) : nil
        ap.replayCursors = cursors
        defer { cursors?.close() }
        let r = try body(&ap)
        // The trigger streams' heads the batch moved, once each (`TriggerTails`).
        try ap.writeOwedHeads()
        defsCache = ap.defsCache
        storedRules = ap.rules.stored
        storedTriggers = ap.triggers
        return r
    }

    /// Runs `body` with the way `mode` applies one entry inside `t`: `.flat` through one
    /// `Applier` for the whole body (`withFlatApplier`), `.nested` each entry in its own nested
    /// transaction (`applyEntry`). `replaying`: the flat Applier's restore-only replay mode.
    /// `apply`'s arguments: the entry, its prebuilt nodes and their tree keys (`Applier.apply`).
    func withEntryApplier<T>(_ t: Txn, mode: ApplyMode, replaying: Bool = false,
                             _ body: (_ apply: (LogEntry, [Node]?, [EncodedPath]?) throws -> WriteResult) throws -> T) throws -> T {
        guard mode == .nested else {
            return try withFlatApplier(t, replaying: replaying) { ap in
                try body { e, nodes, keys in try ap.apply(e, prebuilt: nodes, keys: keys) }
            }
        }
        return try body { e, nodes, keys in try applyEntry(e, in: t, mode: .nested, prebuilt: nodes, keys: keys) }
    }

    /// Applies one entry inside `t` in the given mode.
    func applyEntry(_ e: LogEntry, in t: Txn, mode: ApplyMode, prebuilt: [Node]? = nil, keys: [EncodedPath]? = nil) throws -> WriteResult {
        guard mode == .nested else {
            return try withFlatApplier(t) { try $0.apply(e, prebuilt: prebuilt, keys: keys) }
        }
        var child: OpaquePointer?
        try check(mdb_txn_begin(store.env, t.ptr, 0, &child))
        var ap = Applier(tables: tables, txn: Txn(ptr: child!, changes: recording), defsCache: defsCache, rules: rulesState(),
                         triggers: storedTriggers)
        ap.compactTriggers = compactTriggers
        ap.fullTriggerGroups = triggerGroupsBehind
        do {
            let r = try ap.apply(e, prebuilt: prebuilt, keys: keys)
            try check(mdb_txn_commit(child))
            defsCache = ap.defsCache
            storedRules = ap.rules.stored
            storedTriggers = ap.triggers
            return r
        } catch let err as StorageError {
            mdb_txn_abort(child)
            // Storage failures fail the batch, except a key LMDB cannot hold (bad input that got
            // past validation): that rejects this entry only.
            if case .lmdb(let code, _) = err, code != MDB_BAD_VALSIZE { throw err }
            return WriteResult(index: e.index, term: e.term, namespace: e.namespace, path: e.operation.path,
                               outcome: .rejected(err), value: .empty, version: 0,
                               changeSet: ChangeSet(namespace: e.namespace, changes: []))
        } catch {
            mdb_txn_abort(child)
            throw error
        }
    }

    /// Records the applied position and compacts the log tail, inside `t`. `retention`: the
    /// applied entries to keep, when not `StoreOptions.logRetention` (0: none, as `applyUnlogged`).
    func finish(_ t: Txn, applied a: UInt64, appliedTerm at: UInt64, last: UInt64, lastTerm lt: UInt64, ts: Int64,
                retention: UInt64? = nil) throws -> UInt64 {
        try tables.putMetaU64(t, "applied", a)
        try tables.putMetaU64(t, "appliedTerm", at)
        try tables.putMetaU64(t, "lastIndex", last)
        try tables.putMetaU64(t, "lastTerm", lt)
        try tables.putMetaU64(t, "lastTimestamp", UInt64(bitPattern: ts))
        var first = firstIndex
        let retain = retention ?? store.options.logRetention
        if last > retain {
            var upTo = min(a, last - retain)
            let hold = store.options.archiveHold
            if hold > 0 {
                // Entries the archive does not hold yet stay, up to `hold` of them.
                upTo = min(upTo, max(try ArchiveMark.through(tables, t), a > hold ? a - hold : 0))
            }
            var n = 0
            if store.options.alternatingLog && retention == nil {
                (first, n) = try LogRing.compact(tables, t, upTo: upTo, applied: a, turnLeafPages: store.options.logTurnLeafPages)
            } else if first <= upTo && (retain == 0 || upTo - first + 1 >= store.options.compactionMinimum) {
                // Compact trigger records name entries about to go: they become full first.
                let expansion = try TriggerChangeLog.expandCompacted(tables, t, from: first, through: upTo)
                triggerGroupsBehind = expansion.behind
                if expansion.expanded > 0 {
                    store.metricsState.withLock { $0.triggerRecordsExpanded += UInt64(expansion.expanded) }
                }
                // A cursor walk over the rows that exist: with `logRetention` 0 a single node
                // never writes its entries (`runBatch`), so most of `first...upTo` has no row.
                // Keys are read where they lie (a saturated single node that archives deletes
                // one row per write here).
                let c = try t.cursor(tables.log)
                defer { c.close() }
                let start = Self.logKey(first), perCommit = store.options.compactionPerCommit
                first = upTo + 1
                try c.walkKeys(from: start) { key in
                    guard let i = Self.logIndex(key), i <= upTo else { return .stop }
                    if n == perCommit { first = i; return .stop }
                    n += 1
                    return .delete
                }
            }
            if first != firstIndex { try tables.putMetaU64(t, "firstIndex", first) }
            if n > 0 { store.metricsState.withLock { $0.compactedEntries += UInt64(n) } }
        }
        return first
    }

    static func logIndex(_ key: [UInt8]) -> UInt64? {
        guard key.count == 8 else { return nil }
        return key.reduce(0) { ($0 << 8) | UInt64($1) }
    }

    /// A log key's index read where it lies (`Cursor.firstKey`, `walkKeys`).
    static func logIndex(_ key: UnsafeRawBufferPointer) -> UInt64? {
        guard key.count == 8 else { return nil }
        return UInt64(bigEndian: key.loadUnaligned(as: UInt64.self))
    }

    static func nowMs() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }

    // MARK: - Group commit

    /// Applies and commits a batch of submits; empties `jobs` (the writer lets go of the
    /// batch's requests before their submitters resume, see `complete`).
    func runBatch(_ jobs: inout [StoreCore.Job]) {
        var results: [WriteResult] = []
        let keepLog = store.options.logRetention > 0 || store.options.archiveHold > 0
        guard applied == lastIndex else {
            // Raft mode: the log holds entries not yet committed; `submit` would skip them.
            let err = StorageError.logMismatch("the log has unapplied entries (\(applied) < \(lastIndex)); submit is for single-node use")
            for job in jobs { if case .submit(let sub) = job { sub.completion.fail(err) } }
            return
        }
        // The batch's entries, stamped once: a transaction redone (`withApplyRetry`) applies the
        // same entries with the same timestamps.
        var entries: [(sub: StoreCore.Submission, entry: LogEntry)] = []
        entries.reserveCapacity(jobs.count)
        var idx = lastIndex
        var ts = lastTimestamp
        var bytes = 0
        for job in jobs {
            guard case .submit(let sub) = job else { continue }
            bytes += sub.prepared.size
            idx += 1
            ts = max(ts, Self.nowMs())
            entries.append((sub, LogEntry(index: idx, term: term, namespace: sub.namespace, operation: sub.operation, timestamp: ts,
                                          auth: sub.auth, writer: sub.writer)))
        }
        jobs = []
        let completions = entries.map { $0.sub.completion }
        do {
            let first = try withApplyRetry { mode in
              results = []
              return try writeTxn { t in
                let rows = try keepLog && store.options.alternatingLog ? LogRing.current(tables, t) : tables.log
                func apply(_ each: (LogEntry, [Node]?, [EncodedPath]?) throws -> WriteResult) throws {
                    for (sub, e) in entries {
                        // Without retention the entry would be trimmed in this very transaction:
                        // a single node restarts from its applied state, never from the log (and
                        // the entry was only counted, never encoded: `EmberStore.prepare`). A
                        // single node that archives keeps it as a row until archived: in this
                        // transaction, so it is durable exactly when the write is (one sync per
                        // batch).
                        if keepLog { try appendLogRow(t, rows, e, encodedWithoutHeader: sub.prepared.encoded) }
                        results.append(try each(e, sub.prepared.nodes, nil))
                    }
                }
                try withEntryApplier(t, mode: mode) { each in try apply(each) }
                try pendingVersions?.flush(tables, t)
                return try finish(t, applied: idx, appliedTerm: term, last: idx, lastTerm: term, ts: ts)
              }
            }
            applied = idx; appliedTerm = term; lastIndex = idx; lastTerm = term; lastTimestamp = ts; firstIndex = first
            publishRules()
            publishState()
            store.metricsState.withLock { m in
                m.entriesCommitted += UInt64(results.count)
                m.batches += 1
                m.lastBatchEntries = results.count
                m.maxBatchEntries = max(m.maxBatchEntries, results.count)
                m.batchBytes += UInt64(bytes)
            }
            // Listeners first: a writer is acknowledged only after its change reached them.
            store.publish(results)
            // The requests (their values and nodes) are let go of here, before their submitters
            // resume, so each submitter's task frees its own request's trees, not this thread:
            // freeing a bulk update's trees here was ~6 % of the writer's time in an import,
            // the one thread every write waits for (issue 42).
            entries = []
            var outcomes = results.map { Result<WriteResult, any Error>.success($0) }
            results = []
            Self.complete(completions, handingOver: &outcomes)
        } catch {
            entries = []
            var failures = completions.map { _ in Result<WriteResult, any Error>.failure(error) }
            Self.complete(completions, handingOver: &failures)
        }
    }

    /// Puts `e` as the log's next row in `table` (`tables.log`, or `LogRing`'s current one).
    /// `encoded`: its encoding with a zero header (encoded once, when validated), written into
    /// the row's space in the page (MDB_RESERVE) and stamped there with index, term and
    /// timestamp: no copy of it on the writer. In index order past the log's end: MDB_APPEND
    /// fills its pages (a plain put splits them in half, and the archive's log then writes twice
    /// the pages); below the end (not in `submit`'s use) a plain put.
    func appendLogRow(_ t: Txn, _ table: MDB_dbi, _ e: LogEntry, encodedWithoutHeader encoded: [UInt8]?) throws {
        guard let encoded else {
            try t.putOrdered(table, Self.logKey(e.index), e.encoded())
            return
        }
        var key = e.index.bigEndian
        let rc = withUnsafeMutableBytes(of: &key) { kb -> Int32 in
            var k = MDB_val(mv_size: 8, mv_data: kb.baseAddress)
            var v = MDB_val(mv_size: encoded.count, mv_data: nil)
            let rc = mdb_put(t.ptr, table, &k, &v, flag(MDB_APPEND) | flag(MDB_RESERVE))
            if rc == 0 {
                let row = UnsafeMutableRawBufferPointer(start: v.mv_data, count: encoded.count)
                encoded.withUnsafeBytes { row.copyMemory(from: $0) }
                LogEntry.setHeader(row, index: e.index, term: e.term, timestamp: e.timestamp)
                assert(Array(row) == e.encoded(), "patched log entry differs from its encoding")
            }
            return rc
        }
        if rc == MDB_KEYEXIST {
            return try t.put(table, Self.logKey(e.index), LogEntry.restamped(encoded, index: e.index, term: e.term, timestamp: e.timestamp))
        }
        try check(rc)
        t.changes?.note(table, Self.logKey(e.index))
    }

    /// Resumes the awaiting submitters one by one and gives each sink all of its results of this
    /// commit in one call (in queue order), so a pipelining connection answers a burst at once.
    /// A submitter's result leaves `results` as it is handed over: this thread keeps no
    /// reference to it, so the submitter's task frees it.
    static func complete(_ completions: [StoreCore.Completion], handingOver results: inout [Result<WriteResult, any Error>]) {
        precondition(completions.count == results.count, "one result per completion")
        var sinks: [(sink: any CommitSink, items: [(UInt64, Result<WriteResult, any Error>)])] = []
        var slot: [ObjectIdentifier: Int] = [:]
        for (i, c) in completions.enumerated() {
            let r = results[i]
            results[i] = .failure(HandedOver())
            switch c {
            case .resume(let cont): cont.resume(with: r)
            case .sink(let s, let tag):
                let id = ObjectIdentifier(s)
                if let i = slot[id] {
                    sinks[i].items.append((tag, r))
                } else {
                    slot[id] = sinks.count
                    sinks.append((s, [(tag, r)]))
                }
            }
        }
        for (s, items) in sinks { s.committed(items) }
    }

    /// What a result handed over leaves in its slot (no allocation: an empty error).
    struct HandedOver: Error {}

    // MARK: - Indexes

    func setIndexes(namespace ns: String, _ defs: [IndexDef]) throws {
        // A namespace with stored rules takes its indexes from them (applied with the rules).
        if storedRules[ns] != nil { return }
        try writeTxn { t in
            let old = try tables.indexDefs(t, ns)
            let ap = Applier(tables: tables, txn: t)
            for d in old where !defs.contains(d) { try ap.drop(ns: ns, def: d) }
            for d in defs where !old.contains(d) { try ap.build(ns: ns, def: d) }
            if defs.isEmpty {
                try t.delete(tables.meta, Tables.indexMetaKey(ns))
            } else {
                try t.put(tables.meta, Tables.indexMetaKey(ns), IndexDef.encodeList(defs))
            }
        }
        defsCache[ns] = defs
    }
}
