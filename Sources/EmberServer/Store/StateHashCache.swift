import Dispatch
import EmberStorage
import Synchronization

/// The state hash is a full scan of the tree: status polls reuse the last one while the applied
/// index has not moved. The index is read BEFORE hashing, so a cached hash is never older than
/// its key (at worst it already includes a later write, and the next call recomputes).
///
/// One computation at a time: callers that arrive while one runs wait for it and take its
/// result instead of starting their own (a 200 MB tree takes seconds; status polls every 50 ms
/// used to start a scan each, and the scans starved the node). Waiting callers block their
/// thread; moving status onto the read pool (`ReadPool`) crashed the 6.3.1 compiler's release
/// build (CopyPropagation ownership verifier), so status still runs where its request does.
final class StateHashCache: Sendable {
    private let cached = Mutex<(index: UInt64, hash: String)?>(nil)
    private let computing = DispatchSemaphore(value: 1)

    func hash(of store: EmberStore) throws -> String {
        if let c = cached.withLock({ $0 }), c.index == store.appliedIndex { return c.hash }
        computing.wait()
        defer { computing.signal() }
        let applied = store.appliedIndex
        // Computed by the caller this one waited for?
        if let c = cached.withLock({ $0 }), c.index == applied { return c.hash }
        let hash = try store.stateHash()
        cached.withLock { $0 = (applied, hash) }
        return hash
    }
}
