import Foundation
import Synchronization

/// Orders reads after results released before their transaction's commit.
///
/// A Raft host may answer writes and feed listeners from an apply's results as soon as they are
/// computed, while the writer thread commits that transaction (its `fdatasync`): the entries are
/// already durable in a majority's log and the apply is deterministic, so a crash only means the
/// node applies them again at restart. LMDB readers see the apply only once it commits, so a read
/// that starts after such a release waits for that commit: whatever a client heard (an answer, an
/// event) is in every read it makes afterwards (read-your-writes, monotonic reads), and a new
/// listener's initial read holds every change published before it registered.
///
/// Counted in releases, not log indexes: `released` is bumped (before anything is published) for
/// each transaction whose results go out before it commits; `visible` catches up when it
/// commits. With no early release pending the check is two atomic loads.
final class Visibility: Sendable {
    private let released = Atomic<UInt64>(0)
    private let visible = Atomic<UInt64>(0)
    /// Waiters (threads on `condition`, tasks in `tasks`) for `visible` to reach a release. No
    /// bound of its own: each waiter is a read or a Raft turn already admitted under the node's
    /// limits (read pool, connections, pending requests), and all leave at the next commit.
    private let condition = NSCondition()
    private let tasks = Mutex<[(target: UInt64, continuation: CheckedContinuation<Void, Never>)]>([])
    /// Threads blocked in `waitForReleased` (read under `condition`).
    private let waitingThreads = Atomic<Int>(0)

    /// Key of the thread-local mark of threads that must never wait (`neverWaitOnThisThread`).
    private static let noWaitKey = "ember.visibility.noWait"

    /// A release whose transaction has not committed yet (the writer calls it before publishing).
    func release() -> UInt64 {
        released.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue
    }

    /// The transaction of release `seq` committed (writer thread; releases commit in order).
    func committed(_ seq: UInt64) {
        condition.lock()
        visible.store(seq, ordering: .releasing)
        condition.broadcast()
        condition.unlock()
        let ready = tasks.withLock { list -> [CheckedContinuation<Void, Never>] in
            var ready: [CheckedContinuation<Void, Never>] = []
            list.removeAll { w in
                guard w.target <= seq else { return false }
                ready.append(w.continuation)
                return true
            }
            return ready
        }
        for c in ready { c.resume() }
    }

    /// The last release made visible and the last made (equal: none pending). Read in that
    /// order, so `released` is never behind what `visible` says committed.
    var counts: (visible: UInt64, released: UInt64) {
        let v = visible.load(ordering: .acquiring)
        return (v, released.load(ordering: .acquiring))
    }

    /// The release a read starting now must see, or nil when none is pending.
    private func pendingTarget() -> UInt64? {
        let target = released.load(ordering: .acquiring)
        return visible.load(ordering: .acquiring) >= target ? nil : target
    }

    /// Blocks until every release made so far is visible. A thread marked `neverWaitOnThisThread`
    /// (the writer itself, the listeners' feed that the writer may wait on) reads without waiting.
    func waitForReleased() {
        guard let target = pendingTarget() else { return }
        guard Thread.current.threadDictionary[Self.noWaitKey] == nil else { return }
        condition.lock()
        waitingThreads.add(1, ordering: .relaxed)
        while visible.load(ordering: .acquiring) < target { condition.wait() }
        waitingThreads.subtract(1, ordering: .relaxed)
        condition.unlock()
    }

    /// `waitForReleased` without holding a thread (event loops and tasks call this before reading).
    func released() async {
        guard let target = pendingTarget() else { return }
        await until(target)
    }

    /// Returns once release `seq` is visible (its transaction committed).
    func until(_ seq: UInt64) async {
        guard visible.load(ordering: .acquiring) < seq else { return }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = tasks.withLock { list -> Bool in
                // Checked under the lock `committed` takes after storing: no wake-up is lost.
                if visible.load(ordering: .acquiring) >= seq { return true }
                list.append((seq, c))
                return false
            }
            if now { c.resume() }
        }
    }

    /// Threads and tasks waiting for a commit now (tests wait until a read or a caller is
    /// waiting before they check that it has not returned).
    var waiters: (threads: Int, tasks: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (waitingThreads.load(ordering: .relaxed), tasks.withLock { $0.count })
    }

    /// Marks the calling thread as one that reads without waiting for releases (a thread the
    /// writer may itself wait on would otherwise deadlock with it).
    static func neverWaitOnThisThread() {
        Thread.current.threadDictionary[noWaitKey] = true
    }
}
