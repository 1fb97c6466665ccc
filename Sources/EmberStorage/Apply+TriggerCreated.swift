import EmberCore

/// The common trigger write: a set that creates a location of its namespace's trigger patterns
/// exactly (a new child at `/messages/{id}`). Its one event per group is known without the
/// general diff (`TriggerChanges`): created, before null, after and delta the set's value,
/// params the path's keys at the pattern's wildcards. `recordCreated` writes the records
/// `recordTriggers` writes for it, byte for byte, with no capture or change built on the way,
/// and for a compact record no event or params map either: they were most of what a trigger
/// cost every member per write (`TriggerCreatedTests` checks both give the same rows).
extension Applier {
    /// Whether a set at `path` replacing `old` by `node` fires the namespace's triggers only as
    /// such a creation: every pattern it touches has `path` as a location and none of them
    /// feeds. False: `captureTriggers` and `recordTriggers` (also for a set no trigger sees).
    func setOnlyCreates(_ set: TriggerSet, path: Path, old: Node, node: Node) -> Bool {
        guard old.isEmpty, !node.isEmpty else { return false }
        var touched = false
        for k in set.index.candidates(of: path) {
            let plan = set.plan[k]
            guard plan.pattern.matchesLeading(path) else { continue }
            // Above or below a location: the diff finds which, and what they were.
            guard path.count == plan.pattern.count, plan.feeds.isEmpty else { return false }
            touched = true
        }
        return touched
    }

    /// After the set (`setOnlyCreates`): each group's record of the creation, compact where
    /// `recordTriggers` makes it so, else full.
    func recordCreated(_ e: LogEntry, _ set: TriggerSet, path: Path, node: Node) throws -> TriggerReach {
        var reach = TriggerReach.none
        let compact = compactTriggers && TriggerCompactRecord.rebuildable(e.operation)
        // Made once for every group whose full events are needed (a full record, a lane
        // reading before the commit, a group past its headroom), as `recordTriggers` converts once.
        var after: JSON?
        for k in set.index.candidates(of: path) {
            let plan = set.plan[k]
            guard path.count == plan.pattern.count, plan.pattern.matchesLeading(path) else { continue }
            for fired in plan.createdGroups {
                let type = fired.type
                func events() -> [TriggerEvent] {
                    let json = after ?? node.toJSON()
                    after = json
                    let (authType, authID) = Self.triggerAuth(e.auth)
                    return [TriggerEvent(index: e.index, seq: 0, timestamp: e.timestamp, type: type, location: path,
                                         params: plan.pattern.match(path) ?? [:], before: .null, after: json, delta: json,
                                         authType: authType, authID: authID)]
                }
                if compact && (fullTriggerGroups.isEmpty || !fullTriggerGroups.contains(TriggerTails.Key(ns: e.namespace, group: fired.group))) {
                    try recordShared(e, fired.group, count: 1,
                                     encode: { last in TriggerCompactRecord.encodeCreated(type, at: path, plan.pattern, value: node, entry: e, after: last) },
                                     events: events)
                } else {
                    let full = events()
                    try recordShared(e, fired.group, count: 1,
                                     encode: { last in TriggerChangeLog.encodeRecord(full, after: last, index: e.index) },
                                     events: { full })
                }
                reach = reach.adding(group: fired.group)
            }
        }
        return reach
    }
}
