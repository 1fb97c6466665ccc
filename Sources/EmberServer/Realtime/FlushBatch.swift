import NIOCore

/// The connections a publish gave frames to, grouped by event loop: each loop gets one task per
/// `chunk` connections that flushes them all, instead of one task (a closure, a lock on the
/// loop's queue, possibly a wake-up) per connection. The frames themselves are already queued in
/// each session's outbox, in order, by the publishing thread; only the socket writes wait for
/// the loop. Chunks go out as they fill, so the loops write while the publish goes on, both
/// loops in parallel. Used by one thread (the change feed's) for one publish (`@unchecked
/// Sendable`: it only enters the sessions' locks on that thread; the loops get plain arrays).
final class FlushBatch: @unchecked Sendable {
    /// Connections flushed by one event-loop task: small enough that the first listeners are
    /// written while the rest are still being queued, large enough that hops stay rare.
    static let chunk = 128

    private var groups: [(loop: any EventLoop, sessions: [RealtimeSession])] = []

    /// `session` has frames pending and no flush scheduled: it is flushed with its loop's group.
    func add(_ session: RealtimeSession, loop: any EventLoop) {
        for i in groups.indices where groups[i].loop === loop {
            groups[i].sessions.append(session)
            if groups[i].sessions.count >= Self.chunk { submit(i) }
            return
        }
        var sessions: [RealtimeSession] = []
        sessions.reserveCapacity(Self.chunk)
        sessions.append(session)
        groups.append((loop, sessions))
    }

    /// Hands every group still open to its loop. Call once the publish has queued its frames.
    func submitAll() {
        for i in groups.indices where !groups[i].sessions.isEmpty { submit(i) }
    }

    private func submit(_ i: Int) {
        let sessions = groups[i].sessions
        groups[i].sessions = []
        groups[i].sessions.reserveCapacity(Self.chunk)
        groups[i].loop.execute {
            for s in sessions { s.flushOutbox() }
        }
    }
}
