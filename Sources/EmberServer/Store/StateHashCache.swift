import EmberStorage
import Synchronization

/// The state hash is a full scan of the tree: status polls reuse the last one while the applied
/// index has not moved. The index is read BEFORE hashing, so a cached hash is never older than
/// its key (at worst it already includes a later write, and the next call recomputes).
final class StateHashCache: Sendable {
    private let cached = Mutex<(index: UInt64, hash: String)?>(nil)

    func hash(of store: EmberStore) throws -> String {
        let applied = store.appliedIndex
        if let c = cached.withLock({ $0 }), c.index == applied { return c.hash }
        let hash = try store.stateHash()
        cached.withLock { $0 = (applied, hash) }
        return hash
    }
}
