import EmberCore
import EmberNodeStore
import EmberProtocol
import Foundation
import Logging
import Synchronization

/// A held read refused: the node did not catch up in time, or holds too many reads already.
/// REST answers 503 with `Retry-After`; the wire front closes the connection (see `RealtimeHandler`).
struct CatchingUp: Error, Sendable {
    let refusal: CatchUpGate.Refusal
    var message: String {
        refusal == .removed ? "this node was removed from the cluster: " + refusal.reason : "this node is catching up: " + refusal.reason
    }
    /// REST `Retry-After` (seconds).
    static let retryAfterSeconds = 1
}

/// Drives this node's `CatchUpGate` (docs/CLUSTER.md "What a member serves while it catches up"):
/// client reads (REST GETs, SSE streams, wire listens and gets) call `wait()` first.
///
/// A cluster member starts catching up: one task asks for a ReadIndex (`linearizableBarrier`:
/// the leader's commit index, then this node's apply through it) until one succeeds, then opens
/// the gate for good; another refuses held reads at their deadlines. A single node starts
/// caught up and runs neither.
final class NodeCatchUp: Sendable {
    private struct State {
        var gate: CatchUpGate
        var waiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
    }

    private let state: Mutex<State>
    /// The gate's `caughtUp`, read without the lock on every request once open.
    private let open: Atomic<Bool>
    private let tasks = Mutex<[Task<Void, Never>]>([])
    private let startedAt = ContinuousClock.now
    /// Whether the node was removed from the cluster (it never catches up then: reads are
    /// refused at once rather than held).
    private let removed: @Sendable () -> Bool

    /// How often a failed ReadIndex (no leader yet, overloaded) is asked again, and how often
    /// held reads' deadlines are looked at.
    static let retryInterval = Duration.milliseconds(100)
    static let expiryInterval = Duration.milliseconds(100)

    /// Caught up from the start (single node; tests of the fronts).
    static func caughtUp() -> NodeCatchUp { NodeCatchUp(caughtUp: true, limits: .default) }

    init(caughtUp: Bool, limits: CatchUpGate.Limits, removed: @escaping @Sendable () -> Bool = { false }) {
        self.removed = removed
        state = Mutex(State(gate: CatchUpGate(caughtUp: caughtUp, limits: limits)))
        open = Atomic(caughtUp)
    }

    /// A cluster member's gate, catching up from now: `barrier` returns once this node applied
    /// the cluster's commit index as of (some time after) the call.
    static func catchingUp(limits: CatchUpGate.Limits, barrier: @escaping @Sendable () async throws -> Void,
                           removed: @escaping @Sendable () -> Bool = { false }, logger: Logger) -> NodeCatchUp {
        let c = NodeCatchUp(caughtUp: false, limits: limits, removed: removed)
        let ask = Task { [weak c] in
            var attempts = 0
            while !Task.isCancelled {
                attempts += 1
                do {
                    try await barrier()
                    guard let c else { return }
                    c.reachedCatchUp()
                    logger.info("caught up with the cluster: serving reads", metadata: [
                        "after": "\(ContinuousClock.now - c.startedAt)", "readIndexAttempts": "\(attempts)"])
                    return
                } catch {
                    // No leader yet, or a busy one: ask again (each ask waits up to the node's
                    // no-leader timeout itself).
                    try? await Task.sleep(for: NodeCatchUp.retryInterval)
                }
            }
        }
        let expiry = Task { [weak c] in
            while !Task.isCancelled {
                try? await Task.sleep(for: NodeCatchUp.expiryInterval)
                guard let c, !c.isCaughtUp else { return }
                c.expireDue()
            }
        }
        c.tasks.withLock { $0 = [ask, expiry] }
        return c
    }

    deinit {
        for t in tasks.withLock({ $0 }) { t.cancel() }
    }

    /// Stops asking (the node stops); held reads are refused by their deadlines or their clients.
    func stop() {
        for t in tasks.withLock({ $0 }) { t.cancel() }
    }

    var isCaughtUp: Bool { open.load(ordering: .acquiring) }
    var heldCount: Int { state.withLock { $0.gate.heldCount } }

    /// Returns at once once caught up; else holds the caller until the node catches up, or
    /// throws `CatchingUp` past the gate's limits.
    func wait() async throws {
        if open.load(ordering: .acquiring) { return }
        if removed() { throw CatchingUp(refusal: .removed) }
        let admission = state.withLock { $0.gate.arrive(now: Self.millis()) }
        let id: UInt64
        switch admission {
        case .proceed: return
        case .refuse(let r): throw CatchingUp(refusal: r)
        case .hold(let held): id = held
        }
        let maxWait = state.withLock { $0.gate.limits.maxWaitMillis }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (cont: CheckedContinuation<Void, any Error>) in
                // Released, expired or cancelled between `arrive` and here: answer now.
                let cancelled = Task.isCancelled
                let now: Result<Void, any Error>? = self.state.withLock { s in
                    if s.gate.caughtUp { return .success(()) }
                    guard s.gate.isHeld(id) else {
                        return .failure(cancelled ? CancellationError() : CatchingUp(refusal: .waitedTooLong(millis: maxWait)))
                    }
                    s.waiters[id] = cont
                    return nil
                }
                if let now { cont.resume(with: now) }
            }
        } onCancel: {
            let cont = self.state.withLock { s -> CheckedContinuation<Void, any Error>? in
                s.gate.leave(id)
                return s.waiters.removeValue(forKey: id)
            }
            cont?.resume(throwing: CancellationError())
        }
    }

    /// Opens the gate for good and releases every held read.
    func reachedCatchUp() {
        let released = state.withLock { s in s.gate.reachedCatchUp().compactMap { s.waiters.removeValue(forKey: $0) } }
        open.store(true, ordering: .releasing)
        for c in released { c.resume() }
    }

    private func expireDue() {
        if removed() {
            let all = state.withLock { s in s.gate.refuseAll().compactMap { s.waiters.removeValue(forKey: $0) } }
            for c in all { c.resume(throwing: CatchingUp(refusal: .removed)) }
            return
        }
        let (due, maxWait) = state.withLock { s in
            (s.gate.expire(now: Self.millis()).compactMap { s.waiters.removeValue(forKey: $0) }, s.gate.limits.maxWaitMillis)
        }
        for c in due { c.resume(throwing: CatchingUp(refusal: .waitedTooLong(millis: maxWait))) }
    }

    /// Monotonic milliseconds for the gate's deadlines.
    private static func millis() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}
