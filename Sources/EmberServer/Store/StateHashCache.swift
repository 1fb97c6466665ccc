import EmberStorage
import Foundation

/// The state hash is a full scan of the tree: status polls reuse the last one while the applied
/// index has not moved. The index is read BEFORE hashing, so a cached hash is never older than
/// its key (at worst it already includes a later write, and the next call recomputes).
///
/// One computation at a time: callers that arrive while one runs wait for it instead of starting
/// their own (a 200 MB tree takes seconds; status polls every 50 ms used to start a scan each, and
/// the scans starved the node). Callers run on the read pool (`ReadPool`), so waiting blocks
/// none of Swift's cooperative threads.
final class StateHashCache: @unchecked Sendable {
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var cached: (index: UInt64, hash: String)?
    private var computing = false

    func hash(of store: EmberStore) throws -> String {
        condition.lock()
        while true {
            if let c = cached, c.index == store.appliedIndex {
                condition.unlock()
                return c.hash
            }
            if !computing { break }
            condition.wait()
        }
        computing = true
        condition.unlock()
        defer {
            condition.lock()
            computing = false
            condition.broadcast()
            condition.unlock()
        }
        let applied = store.appliedIndex
        let hash = try store.stateHash()
        condition.lock()
        cached = (applied, hash)
        condition.unlock()
        return hash
    }
}
