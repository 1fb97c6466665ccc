import Dispatch
import EmberStorage
import Synchronization

/// The state hash is a full scan of the tree: status polls reuse the last one while the applied
/// index has not moved. The index is read BEFORE hashing, so a cached hash is never older than
/// its key (at worst it already includes a later write, and the next call recomputes).
///
/// Computed on one serial queue, off Swift's cooperative threads: one scan at a time, and the
/// callers queued behind it take its result. (A 200 MB tree takes seconds to hash; status polls
/// every 50 ms used to start a scan each on the cooperative threads, which starved the node.)
public final class StateHashCache: Sendable {
    public init() {}
    private let cached = Mutex<(index: UInt64, hash: String)?>(nil)
    private let queue = DispatchQueue(label: "ember-state-hash")

    public func hash(of store: EmberStore) async throws -> String {
        if let c = cached.withLock({ $0 }), c.index == store.appliedIndex { return c.hash }
        return try await withCheckedThrowingContinuation { (done: CheckedContinuation<String, any Error>) in
            queue.async { done.resume(with: Result { try self.compute(store) }) }
        }
    }

    private func compute(_ store: EmberStore) throws -> String {
        let applied = store.appliedIndex
        // Computed by the call queued before this one?
        if let c = cached.withLock({ $0 }), c.index == applied { return c.hash }
        let hash = try store.stateHash()
        cached.withLock { $0 = (applied, hash) }
        return hash
    }
}
