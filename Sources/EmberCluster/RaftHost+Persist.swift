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

    /// Makes one of the core's writes durable: term and vote (each store call is one fsynced
    /// transaction), then the entries, with the committed `apply` entries applied in the append's
    /// transaction (one fsync for both). The apply's results are answered as soon as they are
    /// computed, before that transaction commits (the entries are committed in Raft: durable in a
    /// majority's log); this returns once the write is durable.
    func write(_ w: HostPersist) async {
        if let hs = w.hardState {
            do { try await store.setHardState(EmberStorage.HardState(term: hs.term, votedFor: hs.votedFor)) } catch {
                fatalStorage("hard state", error)
            }
        }
        let index = w.apply.last?.index ?? 0
        if let report = w.report {
            // Entries at or below the applied index are committed and, by Log Matching, equal to
            // what the store holds (it refuses to rewrite applied entries): reported, not written.
            let applied = store.appliedIndex
            let fresh = w.entries.filter { $0.index > applied }
            durableReport = report
            defer { decoded.forget() }
            if !fresh.isEmpty {
                do {
                    let entries = try fresh.map(decoded.storageEntry)
                    let encoded = try zip(fresh, entries).map { try RaftPersistence.storageEncoding($0, $1) }
                    // A future leader keeps server timestamps monotonic across the log.
                    lastStamp = max(lastStamp, entries.map(\.timestamp).max() ?? 0)
                    // Every entry was checked where it was proposed (`payload(for:)`, `stamp`):
                    // not again here, nor on every follower.
                    if index > 0 {
                        let (results, release) = try await store.appendAndApplyReleasing(
                            entries: entries, encoded: encoded, through: index, validated: true)
                        // Writers hear while the transaction commits; what the turn reports
                        // (`durableReport`) and sends after its write waits for the commit.
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
        // (HostCore holds it back itself in both cases.)
        guard let index = config.compactionIndex(applied: node.appliedIndex, snapshotIndex: node.log.snapshotIndex) else { return }
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
