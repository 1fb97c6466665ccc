import EmberCore
import EmberStorage

/// The commit feed of an LMDB store: its commits' results as listener changes. A cluster member
/// hides its membership namespace and reports snapshot installs (`stateReplaced`).
public struct LMDBCommitFeed: CommitFeedPort {
    let store: EmberStore
    let hidden: Set<String>
    let stateReplaced: @Sendable (@escaping @Sendable () -> Void) -> Void

    public init(store: EmberStore, hiddenNamespaces: Set<String> = [],
                stateReplaced: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void = { _ in }) {
        self.store = store
        self.hidden = hiddenNamespaces
        self.stateReplaced = stateReplaced
    }

    public func onCommit(_ handler: @escaping @Sendable ([CommittedChange]) -> Void) {
        let hidden = self.hidden
        store.onCommit { results in
            let changes = Self.changes(of: results) { !hidden.contains($0) }
            if !changes.isEmpty { handler(changes) }
        }
    }

    public func onCommit(watched: @escaping @Sendable () -> Set<String>, _ handler: @escaping @Sendable ([CommittedChange]) -> Void) {
        let hidden = self.hidden
        store.onCommit { results in
            // Asked on the writer thread after the commit (or the results' release), once per
            // commit: see `CommitFeedPort.onCommit(watched:_:)` for why a namespace missing here
            // needs no change.
            let watching = watched()
            guard !watching.isEmpty else { return }
            let changes = Self.changes(of: results) { watching.contains($0) && !hidden.contains($0) }
            if !changes.isEmpty { handler(changes) }
        }
    }

    public func onBatchCommitted(_ handler: @escaping @Sendable (Int) -> Void) {
        store.onCommit { results in handler(results.count) }
    }

    public func onStateReplaced(_ handler: @escaping @Sendable () -> Void) { stateReplaced(handler) }

    /// The changes of `results` in the namespaces `wanted` accepts, in log order.
    static func changes(of results: [WriteResult], wanted: (String) -> Bool) -> [CommittedChange] {
        var changes: [CommittedChange] = []
        changes.reserveCapacity(results.count)
        for r in results {
            if wanted(r.namespace), let change = change(from: r) { changes.append(change) }
            // An onDisconnect run: each write it ran is a change of its own.
            for ran in r.ran where wanted(ran.namespace) { if let change = change(from: ran) { changes.append(change) } }
        }
        return changes
    }

    /// A write's listener-facing form: a set at its path, or a merge of the parts that changed.
    static func change(from r: WriteResult) -> CommittedChange? {
        let parts = r.changeSet.changes
        guard !parts.isEmpty else { return nil }
        if parts.count == 1 && parts[0].path == r.path {
            return CommittedChange(index: r.index, namespace: r.namespace, path: r.path, kind: .set(parts[0].node))
        }
        let rel = parts.compactMap { p in r.path.relative(p.path).map { ($0, p.node) } }
        return CommittedChange(index: r.index, namespace: r.namespace, path: r.path, kind: .merge(rel))
    }
}

/// The thread the commit feed's handlers hand their work to (the listeners' fan-out): the
/// store's writer may wait on it (a full queue), so it marks itself to read without waiting for
/// the writer's pending commit (its reads may miss the last apply until it commits).
public enum FanOutThread {
    public static func markCurrent() { EmberStore.readWithoutWaitingOnThisThread() }
}
