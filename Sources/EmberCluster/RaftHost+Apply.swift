import EmberNodeStore
import EmberRaft
import EmberStorage
import Foundation
import Synchronization

/// Applies that run off the Raft loop (issue 42): a committed entry's apply is queued on the
/// store's writer and the loop goes on, so heartbeats, votes and acks for entries already durable
/// never wait for it. A bulk import's multi-MB entry takes a second or more to apply on a busy
/// machine; with the loop awaiting it, a leader sent no heartbeats meanwhile and its followers
/// campaigned (term 13-14 after one 64 MB import into 3 nodes).
///
/// The writer runs jobs in the order they are queued, so an apply queued here is done before any
/// persist or apply the loop queues after it: the store's state stays the log's prefix, and
/// results come back in log order (`outcomes`, filled on the writer thread). The loop takes them
/// at the start of its next turn (`settleApplies`), or before it answers any apply of its own
/// (`answer`), so writes are answered in log order whichever path applied them.
///
/// What reads the applied index synchronously waits for the apply to come back: a linearizable
/// read made ready by Raft (parked until its index is settled), a forwarded write's check of
/// whether its index was applied already (`answerFloor`), compaction (`compactionApplied`), a
/// snapshot install and the loop's stop (`drainApplies`). Snapshots prepared for followers read
/// the store's own applied index; transactions and triggers are decided inside the apply itself.
struct ApplyBook {
    /// Targets of the applies queued off the loop whose results were not taken yet, oldest first.
    var inFlight: [UInt64] = []
    /// Every entry through this index is applied and its results answered (meaningful while
    /// `inFlight` is not empty; otherwise the store's applied index is).
    var floor: UInt64 = 0
    /// Linearizable reads Raft made ready while an apply was in flight: (read id, read index).
    var parkedReads: [(id: UInt64, index: UInt64)] = []
    /// An apply that failed for lack of room: retried on the loop (`durably`) unless a later
    /// apply covered it.
    var retryThrough: UInt64 = 0
}

/// One off-loop apply's outcome, handed from the writer thread to the loop.
struct ApplyOutcome: Sendable {
    let through: UInt64
    let result: Result<[WriteResult], any Error>
}

extension RaftHost {
    /// An apply of more than this many bytes of entries never runs in the loop's own write: the
    /// entries are appended there, and the apply is queued after it (`startApply`). Below it a
    /// follower's apply rides in its append's transaction (one fsync per turn for small writes,
    /// which was measured to matter) and holds the loop only for a small apply's CPU time.
    static let applyInLoopMaxBytes = 256 << 10

    /// Applies through `index`: off the loop (heartbeats and votes never wait for it), or, while
    /// room is short, on the loop after what is in flight (applies then commit before they answer
    /// and are retried there).
    /// `long`: more than `applyInLoopMaxBytes` of entries (`longApplies`).
    func apply(through index: UInt64, metaSync: Bool, long: Bool) async {
        if store.space.isShort {
            await drainApplies()
            await applyCommitted(through: index, metaSync: metaSync)
        } else {
            startApply(through: index, metaSync: metaSync, long: long)
        }
    }

    /// Queues the apply through `index` on the writer; its results come back as an input.
    func startApply(through index: UInt64, metaSync: Bool, long: Bool) {
        if applies.inFlight.isEmpty { applies.floor = store.appliedIndex }
        applies.inFlight.append(index)
        // Counted until its transaction committed, after its results came back: the writer is
        // busy with it until then (a big apply's commit writes its pages and syncs).
        if long { longApplies.add(1, ordering: .relaxed) }
        var finished: (@Sendable () -> Void)?
        if long { finished = { [weak self] in self?.longApplies.subtract(1, ordering: .relaxed) } }
        let queued = store.startApplyCommitted(through: index, metaSync: metaSync, done: { [weak self] result in
            guard let self else { return }
            self.outcomes.withLock { $0.append(ApplyOutcome(through: index, result: result)) }
            self.enqueue(.applyDone, force: true)
        }, finished: finished)
        if !queued { fatalStorage("apply through \(index)", StorageError.closed) }
    }

    /// Answers the results of the applies that came back, in log order, and releases the reads
    /// they made ready. Synchronous: the loop calls it before answering an apply of its own.
    func takeOutcomes() {
        let taken = outcomes.withLock { list -> [ApplyOutcome] in
            defer { list.removeAll() }
            return list
        }
        for outcome in taken {
            assert(applies.inFlight.first == outcome.through, "applies come back in the order they were queued")
            applies.inFlight.removeFirst()
            switch outcome.result {
            case .success(let results):
                applies.floor = max(applies.floor, outcome.through)
                answerResults(results)
            case .failure(let error) where SpaceGuard.isNoSpace(error):
                // Nothing of it was stored; an apply queued after it covers the same entries.
                applies.retryThrough = max(applies.retryThrough, outcome.through)
            case .failure(let error):
                fatalStorage("apply through \(outcome.through)", error)
            }
        }
        releaseParkedReads()
    }

    /// `takeOutcomes`, then the retry of an apply that failed for lack of room once nothing
    /// queued after it is left to cover it (on the loop, waiting for room as every storage call
    /// of the loop does).
    func settleApplies() async {
        takeOutcomes()
        guard applies.inFlight.isEmpty, applies.retryThrough > 0 else { return }
        let through = applies.retryThrough
        applies.retryThrough = 0
        if store.appliedIndex < through { await applyCommitted(through: through) }
    }

    /// Waits for every apply in flight and settles it (before a snapshot install replaces the
    /// state, and when the loop stops: committed writes get their real outcome).
    func drainApplies() async {
        guard !applies.inFlight.isEmpty else { return }
        await store.writerBarrier()
        await settleApplies()
    }

    /// A linearizable read Raft made ready at `index`: served once the apply through it is back.
    func readMadeReady(_ id: UInt64, index: UInt64) {
        if applies.inFlight.isEmpty || index <= applies.floor {
            requests.readReady(id)
        } else {
            requests.readIssuedAt[id] = nil  // answered by Raft: not asked again
            applies.parkedReads.append((id, index))
        }
    }

    private func releaseParkedReads() {
        guard !applies.parkedReads.isEmpty else { return }
        let settled = applies.inFlight.isEmpty ? UInt64.max : applies.floor
        var waiting: [(id: UInt64, index: UInt64)] = []
        for read in applies.parkedReads {
            if read.index <= settled { requests.readReady(read.id) } else { waiting.append(read) }
        }
        applies.parkedReads = waiting
    }

    /// Every entry through this index has been applied and its results answered: a write
    /// appended at or below it finds its result among the recent ones, or nowhere.
    var answerFloor: UInt64 {
        if !applies.inFlight.isEmpty { return applies.floor }
        // A persist queued off the loop applies in its transaction (RaftHost+QueuedPersist):
        // answered are what came before it, the applies queued ahead of it included.
        if let before = persists.answeredBeforeCarried { return max(before, applies.floor) }
        return store.appliedIndex
    }

    /// The applied index compaction may go up to: what the store holds, not what Raft handed out.
    var compactionApplied: UInt64 {
        min(node.appliedIndex, store.appliedIndex)
    }

    /// Whether `entries`' apply is too big to hold the loop for (`applyInLoopMaxBytes`).
    static func applyOffLoop(_ entries: [EmberRaft.LogEntry]) -> Bool {
        var bytes = 0
        for e in entries {
            bytes += e.approximateSize
            if bytes > applyInLoopMaxBytes { return true }
        }
        return false
    }
}
