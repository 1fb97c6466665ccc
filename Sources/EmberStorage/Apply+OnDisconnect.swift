import EmberCore

/// Applies onDisconnect bookkeeping (`OnDisconnectOperation`) to the reserved namespace's tree
/// (`OnDisconnectTable`), and runs a session's writes. Deterministic: every replica holds the
/// same pending writes and runs them at the same log index.
extension Applier {
    mutating func applyOnDisconnect(_ e: LogEntry, _ op: OnDisconnectOperation, into result: inout WriteResult) throws {
        switch op {
        case .holder(let node, let inc):
            let changed = try put(OnDisconnectTable.holderPath(node), Node(.string(inc)), index: e.index)
            result.outcome = .applied(changed: changed)
        case .seal(let node, let inc):
            guard try holder(of: node) == inc else {
                result.outcome = .applied(changed: false)
                return
            }
            _ = try put(OnDisconnectTable.holderPath(node), .empty, index: e.index)
            result.outcome = .applied(changed: true)
        case .register(let s, let write):
            // An incarnation that no longer holds its sessions (sealed, or its node restarted)
            // must not add writes nobody would run: its client is told to reconnect.
            guard try holder(of: s.node) == s.incarnation else {
                result.outcome = .conditionFailed(current: .empty, version: 0)
                return
            }
            let text = OnDisconnectTable.storedWrite(namespace: e.namespace, write, auth: e.auth)
            let path = OnDisconnectTable.sessionPath(s, namespace: e.namespace).child(OnDisconnectTable.writeKey(e.index))
            result.outcome = .applied(changed: try put(path, Node(.string(text)), index: e.index))
        case .cancel(let s, let at):
            let path = OnDisconnectTable.sessionPath(s, namespace: e.namespace)
            let stored = try storedWrites(at: path)
            guard !stored.isEmpty else {
                result.outcome = .applied(changed: false)
                return
            }
            let kept = OnDisconnectCancel.apply(stored.map(\.entry.operation), cancel: at)
            var children: KeyMap<Node> = [:]
            for ((key, entry), write) in zip(stored, kept) {
                guard let write else { continue }
                let text = OnDisconnectTable.storedWrite(namespace: entry.namespace, write, auth: entry.auth)
                children[key] = Node(.string(text))
            }
            result.outcome = .applied(changed: try put(path, Node(children: children), index: e.index))
        case .run(let s):
            let path = OnDisconnectTable.sessionPath(s, namespace: e.namespace)
            let stored = try storedWrites(at: path)
            guard !stored.isEmpty else {
                result.outcome = .applied(changed: false)
                return
            }
            // Deleted first: whatever the writes' fate (applied, denied, invalid), they ran.
            _ = try put(path, .empty, index: e.index)
            // The log holds the run, not these writes: their trigger records are full ones
            // (`TriggerCompactRecord` rebuilds a record from the entry at its index).
            let compact = compactTriggers
            compactTriggers = false
            defer { compactTriggers = compact }
            for (_, saved) in stored {
                // At this entry's index and time (a server timestamp is the disconnect's time),
                // judged by the rules in force now, as the user who registered it.
                let write = LogEntry(index: e.index, term: e.term, namespace: e.namespace, operation: saved.operation,
                                     timestamp: e.timestamp, auth: saved.auth)
                do {
                    result.ran.append(try apply(write))
                } catch StorageError.invalid(let why) {
                    // Nothing was written: a write fails its apply-time checks before its first
                    // put (`apply`). It is dropped like a refused write, the others still run.
                    result.ran.append(WriteResult(index: e.index, term: e.term, namespace: e.namespace,
                                                  path: saved.operation.path, outcome: .rejected(.invalid(why)),
                                                  value: .empty, version: 0,
                                                  changeSet: ChangeSet(namespace: e.namespace, changes: [])))
                }
            }
            result.outcome = .applied(changed: true)
        }
    }

    /// The incarnation holding `node`'s sessions, if any.
    func holder(of node: String) throws -> String? {
        let n = try tables.readNode(t, OnDisconnectTable.namespace, OnDisconnectTable.holderPath(node))
        if case .string(let inc)? = n.leaf { return inc }
        return nil
    }

    /// A session's registered writes in registration order, with their keys.
    func storedWrites(at path: Path) throws -> [(key: String, entry: LogEntry)] {
        let node = try tables.readNode(t, OnDisconnectTable.namespace, path)
        return try node.children.keys.sorted().map { key in (key: key, entry: try OnDisconnectTable.decodeStoredWrite(node.child(key))) }
    }

    /// Replaces the reserved namespace's subtree at `path` (bookkeeping: no listener sees it).
    mutating func put(_ path: Path, _ node: Node, index: UInt64) throws -> Bool {
        try putReserved(OnDisconnectTable.namespace, path, node, index: index)
    }

    /// Writes bookkeeping of the log itself into a reserved namespace (no rules, no condition).
    mutating func putReserved(_ ns: String, _ path: Path, _ node: Node, index: UInt64) throws -> Bool {
        let key = EncodedPath(ns, path)
        let old = try tables.readNode(t, key: key.bytes)
        return try write(ns: ns, path: path, key: key, node: node, old: old, index: index)
    }
}
