import EmberCore

extension Applier {
    /// What a set did: what `applyOperation` makes its `WriteResult` of, and all the
    /// restore-only replay needs (`replay`: it keeps no results).
    enum SetOutcome {
        case denied
        case conditionFailed(current: Node, version: UInt64)
        case applied(changed: Bool, node: Node, reach: TriggerReach)
    }

    /// Applies a set of `json` at `path` (an entry's `.set`). `key`: the path's tree key built
    /// off the writer thread (`EmberStore.replayPrepared`), or nil; `prebuilt`: its node;
    /// `leafRecord`: the node's leaf record at this entry's index (`ReplayPrepared.leafRecord`).
    mutating func applySet(_ e: LogEntry, path: Path, json: JSON, condition cond: WriteCondition?, key preKey: EncodedPath?,
                           prebuilt: [Node]?, leafRecord: [UInt8]? = nil) throws -> SetOutcome {
        let ns = e.namespace
        let key = preKey ?? EncodedPath(ns, path)
        assert(key.bytes == EncodedPath(ns, path).bytes, "a prebuilt key is the set's path's")
        // Every set (issue 38: a learner's and a follower's apply): what it replaces, read
        // with one cursor positioning, and its record put through that cursor — one B-tree
        // descent for the common overwrite of a leaf instead of a point read and a put.
        // The replay's path, whose state matches the write path's (`ArchiveReplayTests`).
        // The replay: its parent's cursor, kept open (`ReplayCursors`).
        let parent = path.isRoot ? nil : try replayCursors?.parent(of: key)
        let probe = try tables.probeWrite(t, key, using: parent?.cursor)
        defer { if parent == nil { probe?.cursor.close() } }
        let (old, oldLeafRecord) = try probe.map { ($0.node, $0.leafRecord) } ?? tables.readNodeRecord(t, key: key.bytes)
        let node: Node
        if let prebuilt { node = prebuilt[0] } else {
            node = try Self.resolve(json, existing: old, depth: path.count, now: e.timestamp)
        }
        // Rules before the condition: a denied writer learns nothing about the current value.
        guard try permits(e, base: path, parts: [(path, node)], isUpdate: false) else { return .denied }
        if let cond, let failed = try checkCondition(cond, ns: ns, path: path, current: old) {
            return .conditionFailed(current: old, version: failed)
        }
        // The common trigger write (a new child at a pattern's location) takes its own way.
        let set = triggers.isEmpty ? nil : triggers[ns]
        let creates = set.map { setOnlyCreates($0, path: path, old: old, node: node) } ?? false
        let capture = creates || set == nil ? nil : try captureTriggers(ns, parts: [(path, old)])
        // Nothing changed the tree since the probe: what it found above the key holds.
        let changed = try write(ns: ns, path: path, key: key, node: node, old: old, oldLeafRecord: oldLeafRecord, index: e.index,
                                probed: probe, parent: parent, leafRecord: prebuilt != nil ? leafRecord : nil)
        var reach = TriggerReach.none
        if changed, creates, let set { reach = try recordCreated(e, set, path: path, node: node) }
        if changed, let capture { reach = try recordTriggers(e, capture, parts: [(path, node)]) }
        return .applied(changed: changed, node: node, reach: reach)
    }

    /// The restore-only replay's apply of one entry (`Writer.replay`): `apply` without the
    /// result it would drop. A set without a writer stamp (a restore's common entry) goes
    /// straight to `applySet`: no `WriteResult` built and torn down per entry (their
    /// reference counting was a tenth of the replay's writer thread).
    mutating func replay(_ e: LogEntry, _ prepared: ReplayPrepared?) throws {
        precondition(replaying, "the restore-only replay's Applier")
        if e.writer == nil, case .set(let path, let json, let cond) = e.operation {
            _ = try applySet(e, path: path, json: json, condition: cond, key: prepared?.keys?[0], prebuilt: prepared?.nodes,
                             leafRecord: prepared?.leafRecord)
        } else {
            _ = try apply(e, prebuilt: prepared?.nodes, keys: prepared?.keys)
        }
    }
}
