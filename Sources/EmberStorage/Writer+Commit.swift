import CLMDB
import Foundation

// The writer's transactions: begin, commit (with the sync choices of `metaSync`/`dataSync`/
// `LazySync`), a releasing job's pending commit, and the empty turn that frees pages.
extension Writer {
    // MARK: - Transactions

    /// Runs `body` in a write transaction and commits it — or, in a releasing job
    /// (`EmberStore.performReleasing`), leaves it for `commitPending` after the job's caller has
    /// its results. A transaction left so commits before the next one begins (LMDB has one writer).
    func writeTxn<T>(_ body: (Txn) throws -> T) throws -> T {
        commitPending()
        var t: OpaquePointer?
        let start = DispatchTime.now().uptimeNanoseconds
        let cpuStart = Self.threadCPUNanos()
        try check(mdb_txn_begin(store.env, nil, 0, &t))
        let r: T
        do {
            r = try body(Txn(ptr: t!, changes: recording))
        } catch {
            mdb_txn_abort(t)
            if SpaceGuard.isNoSpace(error) { store.space.commitFailed(error as! StorageError) }
            throw error
        }
        let timing = CommitTiming(start: start, cpuStart: cpuStart)
        if releasing {
            pending = PendingCommit(txn: t!, seq: store.visibility.release(), metaSync: metaSync, dataSync: dataSync, timing: timing)
            return r
        }
        try commit(t!, metaSync: metaSync, dataSync: dataSync, timing: timing)
        return r
    }

    /// When a transaction's body began, to split its time into applying and committing.
    struct CommitTiming {
        let start: UInt64
        let cpuStart: UInt64
    }

    /// A transaction whose results a releasing job handed out before its commit.
    struct PendingCommit {
        let txn: OpaquePointer
        /// Its release (`Visibility`): reads starting after the hand-out wait for this commit.
        let seq: UInt64
        let metaSync: Bool
        let dataSync: Bool
        let timing: CommitTiming
    }

    /// Commits the transaction a releasing job left, if any. Its results may already have been
    /// answered and published, so a failed commit cannot be taken back: the process stops
    /// (fail-stop, as the Raft host does on any storage failure); the entries are durable in the
    /// log and the restarted node applies them again.
    func commitPending() {
        guard let p = pending else { return }
        pending = nil
        store.beforeReleasedCommit.withLock { $0 }?()
        do { try commit(p.txn, metaSync: p.metaSync, dataSync: p.dataSync, timing: p.timing) } catch {
            fatalError("storage failure: the commit of results already released failed: \(error)")
        }
        // The lane that reads these records after the commit finds them decoded (handed over
        // before the release shows as committed: LMDB has them already).
        let records = store.triggerReleases.committed(through: p.seq)
        if !records.isEmpty { store.triggerRecords.insert(records) }
        store.visibility.committed(p.seq)
    }

    /// `metaSync` false: this commit skips LMDB's meta-page sync (see `EmberStore.applyCommitted`);
    /// `dataSync` false: it skips every sync (`LazySync`), where the store can mark that.
    private func commit(_ t: OpaquePointer, metaSync: Bool, dataSync: Bool, timing: CommitTiming) throws {
        let applied = DispatchTime.now().uptimeNanoseconds
        let cpuApplied = Self.threadCPUNanos()
        // The writer thread is the only one that changes the environment's flags.
        var lazy = !dataSync && store.lazySyncEnabled
        // Without its marker on disk a commit keeps its sync (a machine crash must be told).
        if lazy, (try? lazySync.beforeUnsyncedCommit()) == nil { lazy = false }
        let skipMeta = !metaSync && store.options.durable && !lazy
        if skipMeta { _ = mdb_env_set_flags(store.env, UInt32(MDB_NOMETASYNC), 1) }
        if lazy { _ = mdb_env_set_flags(store.env, UInt32(MDB_NOSYNC), 1) }
        let rc = mdb_txn_commit(t)  // frees the transaction either way
        if lazy { _ = mdb_env_set_flags(store.env, UInt32(MDB_NOSYNC), 0) }
        if skipMeta { _ = mdb_env_set_flags(store.env, UInt32(MDB_NOMETASYNC), 0) }
        if rc != 0 {
            let error = lmdbError(rc)
            if SpaceGuard.isNoSpace(error) { store.space.commitFailed(error) }
            throw error
        }
        if lazy {
            lazySync.lazyCommits += 1
            store.metricsState.withLock { $0.lazyCommits += 1 }
            publishLazySyncOwed()
        } else if store.options.durable && (lazySync.unsyncedCommits > 0 || lazySync.markerPresent) {
            // Its data sync flushed the whole file: the unsynced commits before it too, so the
            // marker has nothing left to warn of (a promoted learner's first write as a voter;
            // the next unsynced commit writes it again).
            lazySync.allDurable()
            lazySync.removeMarker()
            publishLazySyncOwed()
        }
        let done = DispatchTime.now().uptimeNanoseconds
        let cpuDone = Self.threadCPUNanos()
        releaseFreedPages()
        store.metricsState.withLock {
            $0.commits += 1
            $0.transactionNanos += applied - timing.start
            $0.commitNanos += done - applied
            $0.transactionCPUNanos += cpuApplied - timing.cpuStart
            $0.commitCPUNanos += cpuDone - cpuApplied
        }
    }

    /// Growth of the file in one commit past which an empty turn follows (512 KiB of 4 KiB pages).
    static let releaseAfterGrowthPages = 128

    /// LMDB reuses a page freed by transaction N only from transaction N+2 on (a reader may
    /// still be on N-1's snapshot until N commits), so after a large transaction the next one
    /// finds the pages the previous one freed still held and grows the file for its own copies:
    /// a bulk load (each PATCH rewriting most index pages) kept two transactions' worth of copies
    /// free at the file's end (issue 41: 62 MiB of a 194 MiB file). When a commit grew the file
    /// by more than `releaseAfterGrowthPages`, one tiny transaction (a meta value rewritten with
    /// itself: no state changes) moves the transaction id on, so the next large one reuses them.
    /// Never throws: it runs after the real commit succeeded, and a failed empty turn changes
    /// nothing (the next large commit only grows the file as before).
    private func releaseFreedPages() {
        var info = MDB_envinfo()
        guard mdb_env_info(store.env, &info) == 0 else { return }
        let end = info.me_last_pgno
        defer { if fileEnd < end { fileEnd = end } }
        guard fileEnd >= 0, end - fileEnd > Self.releaseAfterGrowthPages else { return }
        var t: OpaquePointer?
        guard mdb_txn_begin(store.env, nil, 0, &t) == 0, let t else { return }
        let txn = Txn(ptr: t, changes: recording)
        let key = Array("applied".utf8)
        guard let applied = try? txn.get(tables.meta, key), (try? txn.put(tables.meta, key, applied)) != nil else {
            mdb_txn_abort(t)
            return
        }
        if mdb_txn_commit(t) == 0 { store.metricsState.withLock { $0.commits += 1 } }
    }

    /// CPU time of the calling thread (the writer's own work, whatever else runs on the machine).
    static func threadCPUNanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}
