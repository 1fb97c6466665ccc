import EmberCore

/// A learner's apply (issue 38): entries its leader committed, applied without log rows.
///
/// A learner neither votes nor counts toward a quorum, and its leader sends it committed entries
/// only: nothing asks it for a log. Its store applies what it is sent, the next entries after its
/// applied index, in the transaction that receives them, and keeps no row of them (no encoding,
/// no row written, none compacted later): its log starts after its applied index, as after a
/// snapshot install. Restarted, it resumes from that index; a leader that compacted past it sends
/// a snapshot. The same `Applier` as every other apply, with results published to listeners.
///
/// Those commits skip the meta page's sync (`MDB_NOMETASYNC`): the pages are synced, the meta
/// page reaches the disk with the next commit; or, `synced: false`, every sync (`LazySync`: one
/// on an interval makes them durable). A process crash (kill -9) loses nothing; a crash of the
/// machine may undo the last transactions (and, unsynced, leaves the store refusing to open:
/// `LazySync`): the learner then restarts behind what it acknowledged, and its leader sends the
/// entries again (a rejection below the acknowledged index is how a leader sees a member that
/// lost entries). Entries the majority holds, so no commit depended on the copy lost.
extension EmberStore {
    /// `entries`: the next after the applied index, contiguous, all committed; the store holds no
    /// unapplied log (`lastLogIndex == appliedIndex`). Answered like `appendAndApplyReleasing`:
    /// the caller may answer the results at once and awaits `committed(release)` before it
    /// reports the entries stored.
    /// `synced` false: its commits skip the data sync too where the store can (`LazySync`,
    /// `commitsLazily`); `startLazySync` on an interval makes them durable.
    public func applyUnloggedReleasing(entries: [LogEntry], synced: Bool = true) async throws -> (results: [WriteResult], release: Release) {
        try checkEntries(entries, encoded: nil, validated: true)
        let (results, seq) = try await performReleasing { w in
            w.dataSync = synced
            defer { w.dataSync = true }
            return try w.applyUnlogged(entries)
        }
        return (results, Release(seq: seq))
    }

    /// `applyUnloggedReleasing`, committed before it returns (a caller short of room retries it).
    public func applyUnlogged(entries: [LogEntry]) async throws -> [WriteResult] {
        try checkEntries(entries, encoded: nil, validated: true)
        return try await perform { w in try w.applyUnlogged(entries) }
    }
}

extension Writer {
    func applyUnlogged(_ entries: [LogEntry]) throws -> [WriteResult] {
        guard let first = entries.first, let last = entries.last else { return [] }
        guard applied == lastIndex else {
            throw StorageError.logMismatch("an unlogged apply into a store whose log has unapplied entries (\(applied) < \(lastIndex))")
        }
        guard first.index == applied + 1 else {
            throw StorageError.logMismatch("unlogged entry \(first.index) after applied index \(applied)")
        }
        for (a, b) in zip(entries, entries.dropFirst()) where b.index != a.index + 1 {
            throw StorageError.logMismatch("unlogged entries are not contiguous at \(b.index)")
        }
        // Committed entries: the meta page's sync can wait for the next commit (see above).
        metaSync = false
        defer { metaSync = true }
        var results: [WriteResult] = []
        var k = 0
        while applied < last.index {
            // Batches as `applyCommitted` makes them: bounded, and ending at a state point.
            let stop = hashPoints.cap(min(last.index, applied + UInt64(store.options.maxBatchEntries)), applied: applied)
            let n = Int(stop - applied)
            // Usually one batch of all of them: the entries and results are handed on, not copied
            // (a copy retains and releases every entry's and result's parts).
            let batch = try applyBatch(through: stop, appending: n == entries.count ? entries : Array(entries[k..<k + n]),
                                       logged: false)
            results.appendBatch(batch)
            k += n
        }
        return results
    }
}
