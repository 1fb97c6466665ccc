import EmberCore

extension EmberStore {
    /// Restore-only apply (`ArchiveRestore`): applies `entries` — the next after the applied
    /// index, consecutive, already committed once — in ONE write transaction, by the same
    /// `Applier` as every other apply (same state, rules, indexes, triggers, onDisconnect), but
    /// without the node's write path around it: no log rows (the entries are in the archive;
    /// the restored store's log starts after the index it reached, as an installed snapshot's
    /// does), no re-encoding, no results kept or published (a store being restored has no
    /// listeners). The caller bounds the batch (`ArchiveRestore.replayBatchEntries`/`Bytes`):
    /// the transaction's dirty pages are held in memory until it commits.
    /// `prebuilt`: per entry, its nodes built off the writer thread (`replayNodes`), or nil.
    public func replayArchived(_ entries: [LogEntry], prebuilt: [[Node]?]? = nil) async throws {
        try await replayArchived(entries, prepared: prebuilt?.map { ReplayPrepared(nodes: $0, keys: nil) })
    }

    /// `replayArchived` with what `replayPrepared` built for each entry off the writer thread.
    func replayArchived(_ entries: [LogEntry], prepared: [ReplayPrepared]?) async throws {
        guard !entries.isEmpty else { return }
        precondition(prepared == nil || prepared!.count == entries.count, "one prepared slot per entry")
        try await perform { w in try w.replay(entries, prepared: prepared) }
    }

    /// What the restore's decoding side builds for an entry, so the writer thread (the replay's
    /// bottleneck: ~70 % of a restore's CPU) does not: its nodes (`replayNodes`), the tree
    /// keys of a set's path or an update's parts (`EncodedPath`, in the operation's order), and
    /// a set's leaf record (`TreeRecord.leaf` at the entry's index).
    static func replayPrepared(_ e: LogEntry) -> ReplayPrepared {
        switch e.operation {
        case .set(let path, _, _):
            let nodes = replayNodes(e.operation)
            // A leaf written at its own (non-root) path: its record, at this entry's index.
            var record: [UInt8]? = nil
            if !path.isRoot, let node = nodes?.first, let leaf = node.leaf {
                record = TreeRecord.leaf(leaf, node.priority, version: e.index)
            }
            return ReplayPrepared(nodes: nodes, keys: [EncodedPath(e.namespace, path)], leafRecord: record)
        case .update(let path, let parts, _):
            return ReplayPrepared(nodes: replayNodes(e.operation), keys: parts.map { EncodedPath(e.namespace, path.appending($0.0)) })
        default:
            return ReplayPrepared(nodes: nil, keys: nil)
        }
    }

    /// The nodes a set or an update without server values writes, built from its JSON as the
    /// writer would (`Applier.resolve` without placeholders), for `replayArchived` to take
    /// instead of building them on the writer thread (as `prepare` does for a submitted write).
    /// nil: anything else, or a value that does not convert (the writer then meets it itself).
    public static func replayNodes(_ operation: WriteOperation) -> [Node]? {
        switch operation {
        case .set(let path, let json, _):
            guard !ServerValues.containsPlaceholder(json), let node = try? Node(json: json, depth: path.count) else { return nil }
            return [node]
        case .update(let path, let parts, _):
            var nodes: [Node] = []
            nodes.reserveCapacity(parts.count)
            for (rel, json) in parts {
                guard !ServerValues.containsPlaceholder(json), let node = try? Node(json: json, depth: path.count + rel.count) else {
                    return nil
                }
                nodes.append(node)
            }
            return nodes
        case .updateText(let path, let text, _):
            var nodes: [Node] = []
            nodes.reserveCapacity(text.count)
            for i in 0..<text.count {
                guard let node = try? text.node(i, depth: path.count + text.parts[i].path.count) else { return nil }
                nodes.append(node)
            }
            return nodes
        default:
            return nil
        }
    }
}

/// An entry's nodes and tree keys built off the writer thread (`EmberStore.replayPrepared`);
/// nil fields: the writer builds them.
struct ReplayPrepared: Sendable {
    var nodes: [Node]?
    var keys: [EncodedPath]?
    /// A set of a leaf at a non-root path: its tree record with the entry's index as version
    /// (what `Applier.write` puts for it).
    var leafRecord: [UInt8]? = nil
}

extension Writer {
    func replay(_ entries: [LogEntry], prepared: [ReplayPrepared]?) throws {
        guard let first = entries.first, let last = entries.last else { return }
        // A store being restored holds no unapplied log (a base, then replays).
        guard applied == lastIndex else {
            throw StorageError.logMismatch("replay into a store whose log has unapplied entries (\(applied) < \(lastIndex))")
        }
        guard first.index == applied + 1 else {
            throw StorageError.logMismatch("replay of entry \(first.index) after applied index \(applied)")
        }
        for (a, b) in zip(entries, entries.dropFirst()) where b.index != a.index + 1 {
            throw StorageError.logMismatch("replayed entries are not contiguous at \(b.index)")
        }
        var ts = lastTimestamp
        try withApplyRetry { mode in
            ts = lastTimestamp
            try writeTxn { t in
                if mode == .flat {
                    // One Applier for the whole transaction, in its restore-only replay mode
                    // (`Applier.replay`: no results built).
                    try withFlatApplier(t, replaying: true) { ap in
                        for (k, e) in entries.enumerated() {
                            try ap.replay(e, prepared?[k])
                            ts = max(ts, e.timestamp)
                        }
                    }
                } else {
                    try withEntryApplier(t, mode: mode) { apply in
                        for (k, e) in entries.enumerated() {
                            _ = try apply(e, prepared?[k].nodes, prepared?[k].keys)
                            ts = max(ts, e.timestamp)
                        }
                    }
                }
                try pendingVersions?.flush(tables, t)
                try tables.putMetaU64(t, "applied", last.index)
                try tables.putMetaU64(t, "appliedTerm", last.term)
                try tables.putMetaU64(t, "lastIndex", last.index)
                try tables.putMetaU64(t, "lastTerm", last.term)
                try tables.putMetaU64(t, "firstIndex", last.index + 1)
                try tables.putMetaU64(t, "lastTimestamp", UInt64(bitPattern: ts))
            }
        }
        applied = last.index; appliedTerm = last.term; lastIndex = last.index; lastTerm = last.term
        firstIndex = last.index + 1; lastTimestamp = ts
        publishRules()
        publishState()
        store.metricsState.withLock { $0.entriesCommitted += UInt64(entries.count) }
    }
}
