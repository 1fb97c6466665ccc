import EmberCore

/// What an applied log entry may have given the trigger delivery lanes of its namespace to
/// read. A commit wakes only the lanes it reaches (`TriggerCommit`): with triggers on several
/// patterns, a lane whose group got no record has nothing new, and every one of them read the
/// store on every commit.
public enum TriggerReach: Sendable, Equatable {
    /// Nothing: a write that fired no trigger.
    case none
    /// Change records of this one group (`TriggerDefinition.group`) of the entry's namespace.
    case group(UInt64)
    /// Cursors moved for delivered entries (an `advance`): every lane of the namespace looks,
    /// as for `.namespace`, but nothing a lane reads changed except what it delivered itself
    /// (its cursor, its own rows settled, records no lane holds any more: `TriggerReleases`).
    case cursors
    /// Possibly anything of the namespace's triggers (their definitions, cursors, states, own
    /// rows, or records of several groups): every lane of the namespace looks. What an entry
    /// that does not say otherwise reaches.
    case namespace

    /// This reach and the records of `group` too.
    public func adding(group: UInt64) -> TriggerReach {
        switch self {
        case .none: return .group(group)
        case .group(let g) where g == group: return self
        default: return .namespace
        }
    }
}
