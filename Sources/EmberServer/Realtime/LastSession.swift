import NIOCore
import Synchronization

/// The SDK's `ls=<last session id>` (a query parameter of the WebSocket URL, sent when it
/// reconnects; read by `WireConnectTarget`): the server ends that previous session at once, so its onDisconnect writes run
/// now instead of when the old socket's missing pong gives it away (reference §6.1).
///
/// - Only a session still open on this node, in the same namespace, is ended. Session ids are 60
///   random bits that only their own client was told (in its hello), so naming one is proof
///   enough of being that client, as with Firebase.
/// - The new session's hello waits (at most `maxWait`) until the old session's teardown is done,
///   its onDisconnect writes committed: a presence flag the old session clears on disconnect is
///   cleared before the new session can set it again, not after.
/// - In a cluster, the old session may live on another node: `ls` is then ignored here. Nothing
///   wrong follows: that node still ends the session when its socket closes or its ping goes
///   unanswered (`RealtimeSession.Limits.pingIntervalSeconds`), and if that node died, the
///   leader runs the session's writes after the onDisconnect lease (`OnDisconnectKeeper`).
enum LastSession {
    /// How long a new connection's hello waits for the session it replaces to be torn down
    /// (its onDisconnect writes go through the log, which may have no leader for a while).
    static let maxWait: Duration = .seconds(5)
}

extension RealtimeSession {
    /// A newer connection of the same client named this session (`ls`): it ends now, its socket
    /// is closed without waiting for a close frame from a client that has moved on, and this
    /// returns once its teardown is done (true) or after `maxWait` (false).
    func endReplaced(maxWait: Duration) async -> Bool {
        finish(reason: "replaced by a newer connection of the same client")
        if let channel = socketChannel {
            // After the close frame that `finish` schedules on the same loop.
            channel.eventLoop.execute { channel.close(promise: nil) }
        }
        return await tornDown.wait(timeout: maxWait)
    }
}

/// Opened once, when a session's teardown is done (it left the hub, its queued writes were
/// answered and its onDisconnect writes ran or were left to the keeper's retry).
final class TeardownLatch: Sendable {
    private struct State {
        var opened = false
        var waiters: [Int: CheckedContinuation<Bool, Never>] = [:]
        /// Tickets whose timer fired before their waiter parked.
        var expired: Set<Int> = []
        var next = 0
    }
    private let state = Mutex(State())

    func open() {
        let waiters = state.withLock { s -> [CheckedContinuation<Bool, Never>] in
            s.opened = true
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        for w in waiters { w.resume(returning: true) }
    }

    /// True once opened; false when `timeout` passes first.
    func wait(timeout: Duration) async -> Bool {
        let ticket = state.withLock { s -> Int? in
            guard !s.opened else { return nil }
            s.next += 1
            return s.next
        }
        guard let ticket else { return true }
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            self?.expire(ticket)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { c in
            let now = state.withLock { s -> Bool? in
                if s.opened { return true }
                if s.expired.remove(ticket) != nil { return false }
                s.waiters[ticket] = c
                return nil
            }
            if let now { c.resume(returning: now) }
        }
    }

    /// The timer of `ticket` fired: its waiter, parked or about to park, gets false.
    private func expire(_ ticket: Int) {
        let w = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            guard !s.opened else { return nil }
            guard let w = s.waiters.removeValue(forKey: ticket) else {
                s.expired.insert(ticket)
                return nil
            }
            return w
        }
        w?.resume(returning: false)
    }
}
