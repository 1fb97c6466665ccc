import EmberCore

/// Exactly-once for stamped client writes (`WriterStamp`): a number its writer already ran is
/// answered from the remembered outcome and not applied again. Decided at apply time, in log
/// order, from replicated state, so every replica answers and applies alike.
extension Applier {
    mutating func applyStamped(_ e: LogEntry, _ stamp: WriterStamp, prebuilt: [Node]?, keys: [EncodedPath]? = nil) throws -> WriteResult {
        let path = WriterTable.path(stamp.writer)
        let stored = try tables.readNode(t, WriterTable.namespace, path)
        let record = Self.writerRecord(stored)
        if let record, let seen = record.outcome(of: stamp.seq) {
            return try answerAgain(e, seen)
        }
        let result = try applyOperation(e, prebuilt: prebuilt, keys: keys)
        let outcome: WriterTable.Outcome
        switch result.outcome {
        case .applied: outcome = .applied
        case .denied: outcome = .denied
        case .conditionFailed: outcome = .conditionFailed
        // Nothing ran: a resend is decided afresh.
        case .rejected, .noop: return result
        }
        var next = record ?? WriterTable.Record.fresh(stamp.seq, outcome, at: e.timestamp)
        next.note(stamp.seq, outcome, at: e.timestamp)
        _ = try putReserved(WriterTable.namespace, path, Node(.string(next.text)), index: e.index)
        try pruneWriters(after: stamp.writer, now: e.timestamp, index: e.index)
        return result
    }

    /// The answer a write sent again gets: what it got the first time, against today's value
    /// (nothing is written, versions do not move, listeners hear nothing).
    private func answerAgain(_ e: LogEntry, _ seen: WriterTable.Outcome) throws -> WriteResult {
        let ns = e.namespace
        let base = e.operation.path
        let current = try tables.readNode(t, ns, base)
        let version = try version(ns, base)
        var result = WriteResult(index: e.index, term: e.term, namespace: ns, path: base, outcome: .applied(changed: false),
                                 value: current, version: version, changeSet: ChangeSet(namespace: ns, changes: []))
        switch seen {
        case .applied, .unknown: result.outcome = .applied(changed: false)
        case .denied: result.outcome = .denied; result.value = .empty
        case .conditionFailed: result.outcome = .conditionFailed(current: current, version: version)
        }
        result.duplicate = true
        return result
    }

    static func writerRecord(_ node: Node) -> WriterTable.Record? {
        guard case .string(let s)? = node.leaf else { return nil }
        return WriterTable.Record(text: s)
    }

    /// Looks at the records after `writer`'s (wrapping to the first) and drops expired ones.
    private mutating func pruneWriters(after writer: String, now: Int64, index: UInt64) throws {
        let base = Tables.treeKey(WriterTable.namespace, .root)
        var keys = try tables.childKeys(t, base: base, from: Tables.treeKey(WriterTable.namespace, WriterTable.path(writer)),
                                        limit: WriterTable.pruneProbe + 1).filter { $0 != writer }
        if keys.count < WriterTable.pruneProbe {
            keys += try tables.childKeys(t, base: base, limit: WriterTable.pruneProbe).filter { $0 != writer && !keys.contains($0) }
        }
        for key in keys.prefix(WriterTable.pruneProbe) {
            let path = WriterTable.path(key)
            let node = try tables.readNode(t, WriterTable.namespace, path)
            guard let record = Self.writerRecord(node) else {
                // Not a record this version wrote: dropped rather than kept forever.
                _ = try putReserved(WriterTable.namespace, path, .empty, index: index)
                continue
            }
            if now - record.seenAt > WriterTable.retentionMs {
                _ = try putReserved(WriterTable.namespace, path, .empty, index: index)
            }
        }
    }
}
