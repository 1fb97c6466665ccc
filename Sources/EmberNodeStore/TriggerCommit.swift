import EmberStorage

/// The lanes one storage commit reaches: the namespaces reached whole and the groups reached
/// alone, from its entries' `TriggerReach`.
public struct TriggerCommit: Sendable {
    struct Group: Hashable {
        let namespace: String
        let group: UInt64
    }

    /// Every lane looks (what a commit that says nothing reaches).
    public static let all = TriggerCommit(everything: true)

    let everything: Bool
    private(set) var namespaces: Set<String> = []
    /// The namespaces whose entries may have changed a trigger's replicated state (pause,
    /// resume, halt, definitions: reach `.namespace`); cursor moves (`.cursors`) do not.
    private(set) var stateNamespaces: Set<String> = []
    private(set) var groups: Set<Group> = []

    private init(everything: Bool) { self.everything = everything }

    /// The entries' namespaces and reaches, in log order.
    public init(_ entries: some Sequence<(namespace: String, reach: TriggerReach)>) {
        everything = false
        // Consecutive entries mostly reach the same group: compared, not hashed again.
        var previous: (String, UInt64)?
        for (ns, reach) in entries {
            switch reach {
            case .none: continue
            case .cursors: namespaces.insert(ns)
            case .namespace:
                namespaces.insert(ns)
                stateNamespaces.insert(ns)
            case .group(let g):
                if let p = previous, p.1 == g && p.0 == ns { continue }
                groups.insert(Group(namespace: ns, group: g))
                previous = (ns, g)
            }
        }
    }

    /// Whether a lane of `namespace` reading `group`'s records may have something new. A lane
    /// of no group (0) reads only rows a definition or cursor entry moves: its namespace.
    public func wakes(namespace: String, group: UInt64) -> Bool {
        everything || namespaces.contains(namespace) || (group != 0 && groups.contains(Group(namespace: namespace, group: group)))
    }

    /// Whether a lane of `namespace` must read its trigger's paused and halted flags again: a
    /// cursor move or a group's records leave them as they were, and reading them after every
    /// such commit was a store read per lane per commit on a busy leader.
    public func changesState(namespace: String) -> Bool {
        everything || stateNamespaces.contains(namespace)
    }

    /// Whether the commit reaches no lane at all.
    public var isEmpty: Bool { !everything && namespaces.isEmpty && groups.isEmpty }
}
