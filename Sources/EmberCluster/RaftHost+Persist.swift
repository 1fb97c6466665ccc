import EmberNodeStore
import EmberRaft
import EmberStorage
import Foundation

/// Making a turn's persists durable, applying committed entries, compaction, and the fail-stop
/// on storage errors.
extension RaftHost {
    /// Applies committed entries (already durable in the store's log) and answers their requests
    /// as soon as the results are computed: the apply's own commit follows on the store's writer,
    /// and reads on this node wait for it (`EmberStore.applyCommittedReleasing`).
    func applyCommitted(through index: UInt64, metaSync: Bool = true) async {
        let applied: (results: [WriteResult], release: Release)
        do { applied = try await store.applyCommittedReleasing(through: index, metaSync: metaSync) } catch {
            fatalStorage("apply through \(index)", error)
        }
        answer(applied.results)
        // The loop steps on only after the commit, as after any flush: a turn that went on would
        // find its own flush queued behind this commit, and a node whose syncs are slow would
        // then answer its peers two commits late (a check-quorum leader steps down).
        await store.committed(applied.release)
    }

    func answer(_ results: [WriteResult]) {
        for r in results {
            requests.applied(r)
            adminApplied(r)
        }
    }

    /// Makes buffered `persist*` actions durable (each store call is one fsynced transaction).
    func flush() async {
        await flush(applyingThrough: 0)
    }

    /// `flush()`, and when `index` > 0 also applies committed entries through `index` in the same
    /// store transaction as the append (one fsync for both). The apply's results are answered as
    /// soon as they are computed, before that transaction commits (the entries are committed in
    /// Raft: durable in a majority's log); this returns once the append is durable.
    func flush(applyingThrough index: UInt64) async {
        // Term and vote first: a log never holds entries of a term the node could forget it saw.
        if let hs = persist.pendingHard {
            persist.pendingHard = nil
            // The store keeps term and vote; the commit index is volatile there (recomputed
            // from the applied index on restart), so commit-only changes cost no fsync.
            if hs.term != persist.hard.term || hs.votedFor != persist.hard.votedFor {
                do { try await store.setHardState(EmberStorage.HardState(term: hs.term, votedFor: hs.votedFor)) } catch {
                    fatalStorage("hard state", error)
                }
            }
            persist.hard = hs
        }
        if !persist.entries.isEmpty {
            // Entries at or below the applied index are committed and, by Log Matching, equal to
            // what the store holds; the store refuses to rewrite applied entries.
            let applied = store.appliedIndex
            let fresh = persist.entries.filter { $0.index > applied }
            // Entries at or below the applied index are already durable: report them too.
            let last = persist.entries[persist.entries.count - 1]
            persist.report = (last.index, last.term)
            persist.entries = []
            defer { persist.forgetDecoded() }
            if !fresh.isEmpty {
                do {
                    let entries = try fresh.map(persist.storageEntry)
                    let encoded = try zip(fresh, entries).map { try RaftPersistence.storageEncoding($0, $1) }
                    // A future leader keeps server timestamps monotonic across the log.
                    lastStamp = max(lastStamp, entries.map(\.timestamp).max() ?? 0)
                    // Every entry was checked where it was proposed (`payload(for:)`, `stamp`):
                    // not again here, nor on every follower.
                    if index > 0 {
                        let (results, release) = try await store.appendAndApplyReleasing(
                            entries: entries, encoded: encoded, through: index, validated: true)
                        // Writers hear while the transaction commits; what the turn reports
                        // (`persist.report`) and sends after its persists waits for the commit.
                        answer(results)
                        await store.committed(release)
                        return
                    }
                    try await store.append(entries: entries, encoded: encoded, validated: true)
                } catch {
                    fatalStorage("append \(fresh.first!.index)...\(fresh.last!.index), apply through \(index)", error)
                }
            }
        }
        guard index > 0 else { return }
        await applyCommitted(through: index)
    }

    /// Bounds Raft's in-memory log: every `snapshotEveryEntries` applied entries Raft drops the
    /// prefix the store covers, but for the last `snapshotCatchUpEntries` (between those two
    /// counts stay in memory). Nothing is serialized: the tree is the snapshot.
    func compactIfDue() {
        // While a snapshot file is being written, keep the entries after it (a follower
        // installing it needs them).
        // Nor while an apply waits for the next turn: Raft counts those entries applied already,
        // and a snapshot must not claim more than the store holds.
        guard !snapshots.preparing, deferredApply == 0,
              let index = config.compactionIndex(applied: node.appliedIndex, snapshotIndex: node.log.snapshotIndex) else { return }
        // Only `.persistSnapshot(discardLog: false)` comes back: nothing to do.
        _ = step(.compact(index: index))
    }

    /// Storage failed under Raft: continuing could diverge from the log we promised to keep, so
    /// the node stops (fail-stop) and recovers from disk on restart.
    func fatalStorage(_ what: String, _ error: any Error) -> Never {
        logger.critical("storage failure; stopping", metadata: ["operation": "\(what)", "error": "\(error)"])
        fatalError("storage failure in \(what): \(error)")
    }
}
