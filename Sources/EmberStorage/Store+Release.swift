import Foundation

/// Results handed out before their transaction commits, and the reads that wait for that commit
/// (`Visibility`): how a Raft host answers writes and feeds listeners one fsync sooner.

/// A transaction whose results were handed out before it committed (`applyCommittedReleasing`).
public struct Release: Sendable {
    /// Its `Visibility` release; 0 when nothing was left to commit.
    let seq: UInt64
}

extension EmberStore {
    /// `applyCommitted`, answered before its last transaction commits: the results come back as
    /// soon as they are computed (and are published to listeners then), while the writer commits.
    /// For entries durable in a majority's log: the apply is deterministic, and a crash before the
    /// commit has the node apply them again at restart. Reads on this node starting after the
    /// return wait for the commit (`Visibility`); `committed(release)` waits for it too.
    public func applyCommittedReleasing(through index: UInt64, metaSync: Bool = true) async throws
        -> (results: [WriteResult], release: Release) {
        let (results, seq) = try await performReleasing { w in try w.applyCommitted(through: index, metaSync: metaSync) }
        return (results, Release(seq: seq))
    }

    /// `applyCommittedReleasing` without waiting: the apply is queued on the writer now, in order
    /// with every call made after this one, and `done` runs on the writer thread with its results
    /// (or error) as soon as they are computed, before the transaction commits. A Raft host's
    /// loop goes on meanwhile (a bulk import's multi-MB entry takes seconds to apply: heartbeats
    /// and votes must not wait for it). `finished` runs on the writer thread once the job's
    /// transaction committed too (the writer is free for what was queued after it). False when
    /// the store is closed (neither runs).
    public func startApplyCommitted(through index: UInt64, metaSync: Bool = true,
                                    done: @escaping @Sendable (Result<[WriteResult], any Error>) -> Void,
                                    finished: (@Sendable () -> Void)? = nil) -> Bool {
        enqueueExclusive { w in
            w.releasing = true
            let r = Result { try w.applyCommitted(through: index, metaSync: metaSync) }
            w.releasing = false
            done(r)
            w.store.afterReleasedHandOut.withLock { $0 }?()
            w.store.afterQueuedApplyHandOut.withLock { $0 }?()
            w.commitPending()
            finished?()
        }
    }

    /// Returns once every writer job queued before this call has run (`startApplyCommitted`'s
    /// `done` included) and its transaction committed.
    public func writerBarrier() async {
        _ = try? await perform { _ in () }
        await released()
    }

    /// `appendAndApply`, answered like `applyCommittedReleasing`. The appended entries are durable
    /// only once `committed(release)` returns: a Raft host reports them (acks, its own match
    /// index) after that, and may answer the applied writes before.
    public func appendAndApplyReleasing(entries: [LogEntry], encoded: [[UInt8]]? = nil, through index: UInt64,
                                        validated: Bool = false) async throws -> (results: [WriteResult], release: Release) {
        try checkEntries(entries, encoded: encoded, validated: validated)
        let (results, seq) = try await performReleasing { w in try w.appendAndApply(entries, encoded: encoded, through: index) }
        return (results, Release(seq: seq))
    }

    /// Returns once the transaction of `release` committed (durable, and visible to reads).
    public func committed(_ release: Release) async {
        await core.visibility.until(release.seq)
    }

    /// Like `perform`, but the caller gets `body`'s value as soon as `body` returns, while the
    /// writer commits the job's last transaction (`Writer.writeTxn` leaves it pending), with the
    /// release that commit makes visible (0: none pending). Reads starting after the hand-out wait
    /// for that commit (`Visibility`); the caller awaits `visibility.until(release)` before
    /// treating what the transaction wrote as durable.
    func performReleasing<T: Sendable>(_ body: @escaping @Sendable (Writer) throws -> T) async throws -> (value: T, release: UInt64) {
        try await withCheckedThrowingContinuation { (cont: CheckedContinuation<(value: T, release: UInt64), any Error>) in
            let queued = enqueueExclusive { w in
                w.releasing = true
                let r = Result { try body(w) }
                w.releasing = false
                let release = w.pending?.seq ?? 0
                cont.resume(with: r.map { ($0, release) })
                w.store.afterReleasedHandOut.withLock { $0 }?()
                w.commitPending()
            }
            if !queued { cont.resume(throwing: StorageError.closed) }
        }
    }

    /// A read of data clients see: it waits for results released before their commit
    /// (`Visibility`), so it holds everything already answered or published on this node.
    func withVisibleRead<T>(_ body: (Txn) throws -> T) throws -> T {
        core.visibility.waitForReleased()
        return try core.withRead(body)
    }

    /// Returns once every result released so far is visible to reads: an async front calls this
    /// before its reads so that they do not block a thread waiting for a commit.
    public func released() async {
        await core.visibility.released()
    }

    /// Marks the calling thread as one that reads without waiting for released results (for a
    /// thread the writer may wait on, such as the listeners' feed): its reads may miss the last
    /// apply until it commits.
    public static func readWithoutWaitingOnThisThread() {
        Visibility.neverWaitOnThisThread()
    }
}
