/// A log entry's trigger bookkeeping (issue 36), replicated like the rules so every replica
/// holds the same definitions, cursors, outboxes and dead letters, and a new leader resumes
/// delivery where the old one's last logged cursor left it. Admin entries only.
public enum TriggerOperation: Sendable, Equatable {
    /// Replaces the namespace's triggers (a `TriggerSet` document, checked before it is logged).
    case define(text: String)
    /// The worker delivered these entries' events (or, with a reason, gave up on them: they move
    /// to the dead-letter list). Named by index, so an entry put back by `replay` meanwhile is
    /// not settled unseen.
    case settle(name: String, indexes: [UInt64], deadLetter: String?)
    /// Delivery stopped at a failing event (`onFailure: stop`).
    case halt(name: String, reason: String)
    case pause(name: String)
    /// Clears `pause` and `halt`.
    case resume(name: String)
    /// Puts the dead letters of entries at or after `from` back in the outbox.
    case replay(name: String, from: UInt64)

    /// Named limits of the bookkeeping entries (checked before they are logged).
    public static let maxSettle = TriggerDelivery.maxSettle
    public static let maxReasonBytes = 1_024
}
