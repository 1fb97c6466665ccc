/// A trigger's replicated delivery state.
public struct TriggerState: Sendable, Equatable {
    /// The highest log index whose events were settled (delivered or dead-lettered).
    public var cursor: UInt64 = 0
    /// Log entries with undelivered events and their bytes. As stored: the trigger's own rows
    /// alone (a feed's, a 0.6.0 outbox's, replayed dead letters); as read (`EmberStore.triggers`):
    /// with the shared change records after its cursor added.
    public var pending: UInt64 = 0
    public var pendingBytes: UInt64 = 0
    /// Events not kept because the retention limit was reached, and the log indexes they span.
    public var skipped: UInt64 = 0
    public var gapFirst: UInt64 = 0
    public var gapLast: UInt64 = 0
    public var deadLetters: UInt64 = 0
    public var paused = false
    public var halted: String?
    /// Events recorded since the trigger was defined (as stored: those not counted by the shared
    /// change records, which add theirs since `eventsBase` when read).
    public var events: UInt64 = 0
    /// The shared change records (one stream per pattern and kinds) this trigger reads: the
    /// stream's id, the stream's position at the cursor (records and bytes delivered), its
    /// events count when the trigger joined it, and while the trigger is past its retention
    /// limit the last record still kept for it (0: none; records after it are not its own).
    public var group: UInt64 = 0
    public var doneRecords: UInt64 = 0
    public var doneBytes: UInt64 = 0
    public var eventsBase: UInt64 = 0
    public var keepThrough: UInt64 = 0
    public var keepRecords: UInt64 = 0
    public var keepBytes: UInt64 = 0
    public var keepEvents: UInt64 = 0

    public var behind: Bool { skipped > 0 }

    /// Named limit: dead letters kept per trigger (the oldest go first).
    public static let maxDeadLetters: UInt64 = 1_000

    public init() {}

    public var json: JSON {
        var o: KeyMap<JSON> = [
            "cursor": .int(Int64(cursor)), "pending": .int(Int64(pending)), "pendingBytes": .int(Int64(pendingBytes)),
            "deadLetters": .int(Int64(deadLetters)), "events": .int(Int64(events)), "paused": .bool(paused),
            "behind": .bool(behind),
        ]
        if let halted { o["halted"] = .string(halted) }
        if behind {
            o["gap"] = .object(["skippedEvents": .int(Int64(skipped)), "firstIndex": .int(Int64(gapFirst)), "lastIndex": .int(Int64(gapLast))])
        }
        return .object(o)
    }
}

