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
    /// Several triggers' cursors in one entry (the worker coalesces what its lanes delivered
    /// meanwhile): each trigger delivered everything it read up to `through`.
    case advance([TriggerCursor])

    /// Named limits of the bookkeeping entries (checked before they are logged).
    public static let maxSettle = TriggerDelivery.maxSettle
    public static let maxReasonBytes = 1_024
    public static let maxCursors = 2 * TriggerSet.maxTriggers
}

/// One trigger's cursor in an `advance` entry: it delivered the events it read from the shared
/// change records of `group` up to `through`, and its own rows at `rows` (a 0.6.0 outbox's,
/// replayed dead letters). A `group` that is no longer the trigger's (redefined meanwhile)
/// moves nothing but those rows.
public struct TriggerCursor: Sendable, Equatable {
    public var name: String
    public var group: UInt64
    public var through: UInt64
    public var rows: [UInt64]

    public init(name: String, group: UInt64, through: UInt64, rows: [UInt64]) {
        self.name = name
        self.group = group
        self.through = through
        self.rows = rows
    }
}

/// Entries of a trigger to deliver, as the worker and the feed read them: the shared change
/// records of its `group` after its cursor, merged in log order with its own rows (`own`).
public struct TriggerOutboxRead: Sendable {
    public var group: UInt64
    public var rows: [(index: UInt64, events: [TriggerEvent], own: Bool)]

    public init(group: UInt64, rows: [(index: UInt64, events: [TriggerEvent], own: Bool)]) {
        self.group = group
        self.rows = rows
    }
}
