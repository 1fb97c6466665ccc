import EmberCore

/// Where each trigger group's stream of change records ends in this transaction (the group's
/// summary and its newest position), noted by the writes that appended to it, so the next
/// matching write of the batch appends its record without reading the summary and seeking the
/// stream's end again: two B-tree reads per matching write on every replica, for a position
/// the previous write just computed. The same records are written either way.
///
/// Lives for one flat transaction (`Writer.withApplyRetry`, like `PendingVersions`): a nested
/// retry runs without it, so no record follows a position that an aborted entry wrote. Trigger
/// bookkeeping entries (definitions, cursors: `Applier.applyTriggers`) forget it all, since
/// they prune records and rewrite summaries; a write past a group's headroom (which rewrites
/// states and the summary) or one completing an onDisconnect run's record forgets its group
/// (but for one whose triggers were all past their limits already: nothing of the tail moved).
final class TriggerTails {
    struct Key: Hashable {
        let ns: String
        let group: UInt64
    }

    struct Tail {
        var summary: TriggerChangeLog.Summary
        var last: TriggerChangeLog.Position
        /// The stream's key prefix (`TriggerChangeLog.recordsPrefix`), built once for its writes.
        var prefix: [UInt8]
    }

    /// Named limit: groups remembered per transaction (past it the table starts over; a group
    /// not remembered is read from the store as before).
    static let maxGroups = 1_024

    private var tails: [Key: Tail] = [:]
    /// The tail noted last, kept out of `tails` while it is the one noted (a batch's matching
    /// writes mostly append to one group: compared, not hashed, per write). Plain fields, not
    /// an optional pair: reading or replacing it copies no key.
    private var hasRecent = false
    private var recentNs = ""
    private var recentGroup: UInt64 = 0
    private var recentTail = Tail(summary: .init(), last: .init(), prefix: [])

    private func isRecent(_ ns: String, _ group: UInt64) -> Bool { hasRecent && recentGroup == group && recentNs == ns }

    /// The records the transaction appended after a tail, in log order, for a delivery lane
    /// that reads before the commit (`TriggerReleases`); nil when no lane reads so
    /// (`collecting` false at the start).
    private(set) var records: [TriggerReleases.Record]?

    /// Whether `appended` keeps what it is given (a lane reads before the commit).
    var collecting: Bool { records != nil }

    init(collecting: Bool = false) {
        records = collecting ? [] : nil
    }

    func appended(_ ns: String, _ group: UInt64, _ index: UInt64, _ events: [TriggerEvent]) {
        records?.append(TriggerReleases.Record(namespace: ns, group: group, index: index, events: events))
    }

    func tail(_ ns: String, _ group: UInt64) -> Tail? {
        if isRecent(ns, group) { return recentTail }
        return tails.isEmpty ? nil : tails[Key(ns: ns, group: group)]
    }

    func note(_ ns: String, _ group: UInt64, _ tail: Tail) {
        if isRecent(ns, group) { recentTail = tail; return }
        if hasRecent { store(Key(ns: recentNs, group: recentGroup), recentTail) }
        // A copy of this group's in `tails` is older: `tail` looks at the recent one first,
        // and that replaces it when it moves there.
        hasRecent = true
        recentNs = ns
        recentGroup = group
        recentTail = tail
    }

    /// `note` of the recent tail moved on to `last` (its summary and prefix unchanged).
    func advance(_ ns: String, _ group: UInt64, to last: TriggerChangeLog.Position) -> Bool {
        guard isRecent(ns, group) else { return false }
        recentTail.last = last
        return true
    }

    private func store(_ key: Key, _ tail: Tail) {
        if tails.count >= Self.maxGroups && tails[key] == nil { tails.removeAll(keepingCapacity: true) }
        tails[key] = tail
    }

    func forget(_ ns: String, _ group: UInt64) {
        if isRecent(ns, group) { hasRecent = false }
        tails[Key(ns: ns, group: group)] = nil
    }

    func forgetAll() {
        hasRecent = false
        tails.removeAll()
    }

    var isEmpty: Bool { tails.isEmpty && !hasRecent }
}
