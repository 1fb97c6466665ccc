import EmberNodeStore
import EmberRaft
import EmberRaftHost
import EmberStorage
import Foundation

/// Making a turn's persists durable, applying committed entries, compaction, and the fail-stop
/// on storage errors.
extension RaftHost {
    /// Applies committed entries (already durable in the store's log) and answers their requests
    /// as soon as the results are computed: the apply's own commit follows on the store's writer,
    /// and reads on this node wait for it (`EmberStore.applyCommittedReleasing`).
    func applyCommitted(through index: UInt64, metaSync: Bool = true) async {
        let results = await durably("apply through \(index)") { () async throws -> [WriteResult] in
            if self.store.space.isShort {
                // Committed before answered, so a failure for lack of room is retried.
                return try await self.store.applyCommitted(through: index, metaSync: metaSync)
            }
            let applied = try await self.store.applyCommittedReleasing(through: index, metaSync: metaSync)
            self.answer(applied.results)
            // The loop steps on only after the commit, as after any flush: a turn that went on
            // would find its own flush queued behind this commit, and a node whose syncs are slow
            // would then answer its peers two commits late (a check-quorum leader steps down).
            await self.store.committed(applied.release)
            return []
        }
        answer(results ?? [])
    }

    /// Answers the results of an apply made on the loop. Applies queued before it off the loop
    /// were done first (the writer keeps their order): their results are answered first.
    func answer(_ results: [WriteResult]) {
        takeOutcomes()
        answerResults(results)
    }

    func answerResults(_ results: [WriteResult]) {
        // Nothing waits on this node (a learner's usual case): no lookups per result.
        guard requests.needsResults || !admin.awaitingApply.isEmpty else { return }
        for r in results {
            requests.applied(r)
            adminApplied(r)
        }
    }

    /// Makes one of the core's writes durable: term and vote (each store call is one fsynced
    /// transaction), then the entries, with the committed `apply` entries applied in the append's
    /// transaction (one fsync for both). The apply's results are answered as soon as they are
    /// computed, before that transaction commits (the entries are committed in Raft: durable in a
    /// majority's log); this returns once the write is durable.
    func write(_ w: HostPersist) async {
        if let hs = w.hardState {
            let stored: Void? = await durably("hard state") {
                try await self.store.setHardState(EmberStorage.HardState(term: hs.term, votedFor: hs.votedFor))
            }
            if stored == nil { return }
        }
        let index = w.apply.last?.index ?? 0
        // A big apply never holds the loop (RaftHost+Apply): the entries are appended here and
        // their apply is queued after the append. A learner's stays in its write (it has no
        // vote, and its batch is stored without log rows there).
        let offLoop = index > 0 && !store.space.isShort && !node.isLearner && Self.applyOffLoop(w.apply)
        // A learner's write may store its batch without log rows, judged by the store's applied
        // index: anything still applying off the loop is settled first.
        if node.isLearner { await drainApplies() }
        if let report = w.report {
            durableReport = report
            defer { decoded.forget() }
            let through = offLoop ? 0 : index
            let what = "append \(w.entries.first?.index ?? 0)...\(w.entries.last?.index ?? 0), apply through \(through)"
            let applied = await durably(what) { try await self.append(w.entries, applyingThrough: through) }
            guard let applied else { return }
            if applied { return }
        }
        guard index > 0 else { return }
        await apply(through: index, metaSync: true, long: offLoop)
    }

    /// Appends `entries` (those the store has not applied: a retry after a failure skips what
    /// got in), applying through `index` in the same transaction when it is set; true when it
    /// applied. Idempotent, so `durably` may run it again.
    private func append(_ all: [EmberRaft.LogEntry], applyingThrough index: UInt64) async throws -> Bool {
        // Entries at or below the applied index are committed and, by Log Matching, equal to
        // what the store holds (it refuses to rewrite applied entries): reported, not written.
        // An apply queued off the loop is done before this append (the writer keeps their order),
        // and only ever covers entries the store's log already holds.
        let fresh = unappliedEntries(all)
        guard !fresh.isEmpty else { return false }
        if unlogged(fresh, applyingThrough: index) {
            // A learner's batch is decoded here (its apply path takes decoded entries), straight
            // from the bytes it was sent: no log row, so no restamped copy of each entry.
            let entries = try fresh.map { e in
                let entry = try decoded.storageEntry(e)
                lastStamp = max(lastStamp, entry.timestamp)
                return entry
            }
            if store.space.isShort {
                answer(try await store.applyUnlogged(entries: entries))
                return true
            }
            let (results, release) = try await store.applyUnloggedReleasing(entries: entries, synced: !syncsLazily)
            answer(results)
            await store.committed(release)
            return true
        }
        let raw = try encoded(fresh)
        // Every entry was checked where it was proposed (`payload(for:)`, `stamp`): not again
        // here, nor on every follower.
        guard index > 0 else {
            try await store.append(encoded: raw)
            return false
        }
        if store.space.isShort {
            answer(try await store.appendAndApply(encoded: raw, through: index))
            return true
        }
        let (results, release) = try await store.appendAndApplyReleasing(encoded: raw, through: index)
        // Writers hear while the transaction commits; what the turn reports (`durableReport`)
        // and sends after its write waits for the commit.
        answer(results)
        await store.committed(release)
        return true
    }

    /// The entries of `all` the store has not applied, as the store appends them: decoded only
    /// where this host has them decoded already (`DecodedEntries`: a leader's own and checked
    /// writes) or they are Raft's own (no-ops, membership); a client entry from the leader goes
    /// encoded, its body decoded by the store's writer (the loop reads its header only: the
    /// timestamp, which keeps a future leader's server timestamps monotonic across the log).
    func unapplied(_ all: [EmberRaft.LogEntry]) throws -> (fresh: [EmberRaft.LogEntry], entries: [EncodedEntry]) {
        let fresh = unappliedEntries(all)
        return (fresh, try encoded(fresh))
    }

    /// The entries of `all` after the store's applied index (an apply queued off the loop
    /// counted as done: the writer keeps the order).
    func unappliedEntries(_ all: [EmberRaft.LogEntry]) -> [EmberRaft.LogEntry] {
        let appliedIndex = max(store.appliedIndex, applies.inFlight.last ?? 0)
        guard let first = all.first, first.index <= appliedIndex else { return all }
        return all.filter { $0.index > appliedIndex }
    }

    /// `fresh` as the store appends them (see `unapplied`).
    func encoded(_ fresh: [EmberRaft.LogEntry]) throws -> [EncodedEntry] {
        var out: [EncodedEntry] = []
        out.reserveCapacity(fresh.count)
        for e in fresh {
            let known = decoded.entry(for: e)
            if e.kind == .normal && known == nil {
                let stamp = try EmberStorage.LogEntry.timestamp(of: e.data)
                lastStamp = max(lastStamp, stamp)
                let bytes = try EmberStorage.LogEntry.restamped(e.data, index: e.index, term: e.term, timestamp: stamp)
                out.append(EncodedEntry(index: e.index, term: e.term, encoded: bytes, decoded: nil))
            } else {
                let entry = try known ?? RaftPersistence.storageEntry(e)
                lastStamp = max(lastStamp, entry.timestamp)
                out.append(EncodedEntry(index: e.index, term: e.term, encoded: try RaftPersistence.storageEncoding(e, entry), decoded: entry))
            }
        }
        return out
    }

    /// Whether `fresh` (the entries after the store's applied index) is stored without log rows
    /// (`EmberStore.applyUnloggedReleasing`): on a learner (as Raft's configuration stands after
    /// the turn: a write that appends its promotion is a voter's), when the write applies all of
    /// them (its leader sends a learner committed entries only), the store holds no unapplied
    /// log, and no archive needs the rows (every member of an archiving cluster keeps what the
    /// archive lacks, `StoreOptions.archiveHold`).
    func unlogged(_ fresh: [EmberRaft.LogEntry], applyingThrough index: UInt64) -> Bool {
        guard node.isLearner, let first = fresh.first, let last = fresh.last, index >= last.index else { return false }
        return store.options.archiveHold == 0 && store.lastLogIndex == store.appliedIndex && first.index == store.appliedIndex + 1
    }

    /// Whether this learner's batches commit without a data sync (`ClusterConfiguration.
    /// learnerSyncMillis`, `EmberStorage.LazySync`). Its acknowledgements then precede
    /// durability: Raft tolerates a learner that comes back with less than it acknowledged (the
    /// leader sends it again), and its copy counts for no quorum. A promoted learner's first
    /// write as a voter is an ordinary synced commit, which flushes everything before it.
    var syncsLazily: Bool { config.learnerSyncMillis > 0 && store.commitsLazily }

    /// On a tick: the interval's sync of a learner's unsynced commits (queued on the writer, the
    /// loop goes on), or its idle intervals that remove the marker. Nothing is queued on a
    /// member whose store owes none (a voter, a promoted learner after its first synced commit,
    /// a learner idle long enough): the writer is not woken once a second for nothing.
    func syncLazyCommitsIfDue(now: ContinuousClock.Instant) {
        guard syncsLazily else { return }
        let (due, last) = Self.lazySyncTick(owed: store.owesLazySync, now: now, last: lastLazySync,
                                            interval: .milliseconds(config.learnerSyncMillis))
        lastLazySync = last
        if due { store.startLazySync() }
    }

    /// Whether a tick at `now` queues the interval's sync, and when the interval counts from:
    /// while nothing is owed it restarts at every tick, so the first sync comes about one
    /// interval after the first unsynced commit, not at the first tick after a long idle time.
    static func lazySyncTick(owed: Bool, now: ContinuousClock.Instant, last: ContinuousClock.Instant,
                             interval: Duration) -> (due: Bool, last: ContinuousClock.Instant) {
        guard owed else { return (false, now) }
        return now - last >= interval ? (true, now) : (false, last)
    }

    /// How long a storage call that failed for lack of room waits before it is tried again: the
    /// first wait, and the longest.
    static let noRoomRetry: (first: Duration, longest: Duration) = (.milliseconds(20), .seconds(2))

    /// Runs a storage call of the Raft loop. A failure for lack of room (map full, disk full)
    /// aborted its transaction and stored nothing, so the call is retried until room returns,
    /// with the loop held (no acks, no votes: the others go on without this member, and a leader
    /// is replaced by check-quorum); the NOSPACE alarm is up meanwhile. While room is short the
    /// calls commit before they answer, so such a failure is always one that can be retried.
    /// Any other failure stops the node (`fatalStorage`). Nil: the node is stopping and the call
    /// was given up (`abandoned`: the rest of the turn does not run, nothing of it was answered).
    func durably<T>(_ what: String, _ call: () async throws -> T) async -> T? {
        var wait = Self.noRoomRetry.first
        var stalledSince: ContinuousClock.Instant?
        while true {
            do {
                let value = try await call()
                if let since = stalledSince {
                    logger.notice("storage has room again; the Raft loop goes on",
                                  metadata: ["operation": "\(what)", "stalled": "\(ContinuousClock.now - since)"])
                }
                return value
            } catch where SpaceGuard.isNoSpace(error) {
                if stalledSince == nil {
                    stalledSince = .now
                    logger.error("storage out of room; the Raft loop waits for space and retries",
                                 metadata: ["operation": "\(what)", "error": "\(error)"])
                }
                if stopRequested.load(ordering: .relaxed) {
                    logger.error("stopping while out of room: the write is given up (this node answered nothing of it; restarted, it recovers from its disk)",
                                 metadata: ["operation": "\(what)"])
                    abandoned = true
                    return nil
                }
                try? await Task.sleep(for: wait)
                wait = min(wait * 2, Self.noRoomRetry.longest)
            } catch {
                fatalStorage(what, error)
            }
        }
    }

    /// Bounds Raft's in-memory log: every `snapshotEveryEntries` applied entries Raft drops the
    /// prefix the store covers, but for the last `snapshotCatchUpEntries` (between those two
    /// counts stay in memory), and by bytes (`snapshotCatchUpBytes`). Nothing is serialized: the
    /// tree is the snapshot.
    func compactIfDue() {
        // While a snapshot file is being written, keep the entries after it (a follower
        // installing it needs them).
        // Nor while an apply waits for the next turn: Raft counts those entries applied already,
        // and a snapshot must not claim more than the store holds.
        // (HostCore holds it back itself in both cases.)
        guard let index = config.compactionIndex(applied: compactionApplied, log: node.log) else { return }
        // Only `.compacted` comes back: the store trims its own log (StoreOptions.logRetention).
        _ = core.handle(.compact(index: index))
    }

    /// Storage failed under Raft: continuing could diverge from the log we promised to keep, so
    /// the node stops (fail-stop) and recovers from disk on restart.
    func fatalStorage(_ what: String, _ error: any Error) -> Never {
        logger.critical("storage failure; stopping", metadata: ["operation": "\(what)", "error": "\(error)"])
        fatalError("storage failure in \(what): \(error)")
    }
}
