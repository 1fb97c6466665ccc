import CLMDB
import EmberCore
import Synchronization

/// The state exactly at a requested log index, for the members' corruption check: under steady
/// writes every member applies past any index it is told about, so "hash at your applied index"
/// rarely meets. A hash point makes the writer end an apply batch at the index and open a read
/// transaction right after that batch commits; the hash is then computed from that snapshot on
/// another thread while the writer goes on.
public final class StatePoint: @unchecked Sendable {
    /// The log index the snapshot holds the state at (its `applied`).
    public let index: UInt64
    private let snapshot: ReadSnapshot
    private let tables: Tables

    init(index: UInt64, snapshot: ReadSnapshot, tables: Tables) {
        self.index = index
        self.snapshot = snapshot
        self.tables = tables
    }

    /// `EmberStore.stateHash()` of the state at `index` (a full scan: run it off the writer and
    /// off the event loops).
    public func hash() throws -> String {
        try EmberStore.stateHash(snapshot.read, tables: tables, prefix: [])
    }

    /// Ends the read transaction (it keeps old pages alive until then).
    public func end() { snapshot.end() }
}

/// One waiter for a hash point: resolved once, by the writer (a snapshot, or nil when the index
/// was passed without stopping) or by the waiter's deadline (nil; a snapshot arriving later is
/// ended at once).
final class HashPointWaiter: Sendable {
    private let done = Mutex(false)
    private let deliver: @Sendable (StatePoint?) -> Void

    init(_ deliver: @escaping @Sendable (StatePoint?) -> Void) {
        self.deliver = deliver
    }

    func resolve(_ point: StatePoint?) {
        let first = done.withLock { d -> Bool in
            defer { d = true }
            return !d
        }
        if first { deliver(point) } else { point?.end() }
    }
}

/// The writer's pending hash points (writer thread only).
struct HashPoints {
    /// Points waited on at once at most; more are answered nil at once (a round that asks for
    /// more than a few is misbehaving, and each point may split an apply batch).
    static let maxPoints = 16

    private var waiting: [UInt64: [HashPointWaiter]] = [:]

    var isEmpty: Bool { waiting.isEmpty }

    /// `stop` lowered to the first pending point past `applied`, so a batch ends there.
    func cap(_ stop: UInt64, applied: UInt64) -> UInt64 {
        guard !waiting.isEmpty else { return stop }
        let next = waiting.keys.filter { $0 > applied }.min()
        return next.map { min($0, stop) } ?? stop
    }

    mutating func add(_ index: UInt64, _ waiter: HashPointWaiter) -> Bool {
        guard waiting[index] != nil || waiting.count < Self.maxPoints else { return false }
        waiting[index, default: []].append(waiter)
        return true
    }

    /// Removes the waiters of every point at or below `applied`: those at `applied` are due, the
    /// ones below were passed (a snapshot install jumps over them).
    mutating func take(applied: UInt64) -> (due: [HashPointWaiter], passed: [HashPointWaiter]) {
        var due: [HashPointWaiter] = [], passed: [HashPointWaiter] = []
        for (index, waiters) in waiting where index <= applied {
            if index == applied { due += waiters } else { passed += waiters }
            waiting[index] = nil
        }
        return (due, passed)
    }
}

extension Writer {
    /// Registers a hash point (writer thread), or answers it now when `index` is the applied one.
    func addHashPoint(_ index: UInt64, _ waiter: HashPointWaiter) {
        if index < applied { waiter.resolve(nil); return }
        if !hashPoints.add(index, waiter) { waiter.resolve(nil); return }
        settleHashPoints()
    }

    /// Answers the points the apply has reached. The batch ending at a due point is committed
    /// first (a releasing job may hold it pending) so the snapshot sees it.
    func settleHashPoints() {
        guard !hashPoints.isEmpty else { return }
        let (due, passed) = hashPoints.take(applied: applied)
        for w in passed { w.resolve(nil) }
        guard !due.isEmpty else { return }
        commitPending()
        for w in due {
            let snapshot = try? ReadSnapshot(store.environment.withLock { $0 })
            w.resolve(snapshot.map { StatePoint(index: applied, snapshot: $0, tables: tables) })
        }
    }
}

extension EmberStore {
    /// The state exactly at log index `index` once this member's apply reaches it, or nil when it
    /// had already passed it, or `timeout` ran out first. The caller hashes and ends the point.
    public func statePoint(at index: UInt64, timeout: Duration) async -> StatePoint? {
        await requestStatePoint(at: index, timeout: timeout).value
    }

    /// `statePoint`, with the request queued on the writer before this returns (jobs run in
    /// order: an apply queued after it cannot pass the point first).
    public func requestStatePoint(at index: UInt64, timeout: Duration) -> Task<StatePoint?, Never> {
        let (stream, out) = AsyncStream<StatePoint?>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let waiter = HashPointWaiter { point in
            out.yield(point)
            out.finish()
        }
        let queued = enqueueExclusive { w in w.addHashPoint(index, waiter) }
        if !queued { waiter.resolve(nil) }
        return Task {
            // The deadline is a child of this task, cancelled once the point resolves: no timer
            // outlives the request (a resolved point used to leave one asleep for `timeout`).
            await withTaskGroup(of: Void.self) { group in
                if queued {
                    group.addTask {
                        guard (try? await Task.sleep(for: timeout)) != nil else { return }
                        waiter.resolve(nil)
                    }
                }
                var point: StatePoint?
                for await p in stream { point = p }
                group.cancelAll()
                return point
            }
        }
    }
}
