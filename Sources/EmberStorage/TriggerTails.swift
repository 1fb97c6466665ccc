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

    /// The first `smallGroups` groups noted, searched in order (their group compared, then the
    /// namespace: no string hashed per write; a batch's writes mostly reach a few groups, ten
    /// patterns' writes spread over ten), the tail found last looked at first; past them, `tails`.
    private var small: [Entry] = []
    private var hint = 0
    private var tails: [Key: Tail] = [:]

    private struct Entry {
        let ns: String
        let group: UInt64
        var tail: Tail
    }

    /// Named limit: groups searched in order before the table.
    static let smallGroups = 16

    private func find(_ ns: String, _ group: UInt64) -> Int? {
        if hint < small.count && small[hint].group == group && small[hint].ns == ns { return hint }
        for i in small.indices where small[i].group == group && small[i].ns == ns {
            hint = i
            return i
        }
        return nil
    }

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
        if let i = find(ns, group) { return small[i].tail }
        return tails.isEmpty ? nil : tails[Key(ns: ns, group: group)]
    }

    func note(_ ns: String, _ group: UInt64, _ tail: Tail) {
        if let i = find(ns, group) { small[i].tail = tail; return }
        if small.count < Self.smallGroups && tails.isEmpty {
            small.append(Entry(ns: ns, group: group, tail: tail))
            hint = small.count - 1
            return
        }
        let key = Key(ns: ns, group: group)
        if tails.count >= Self.maxGroups && tails[key] == nil { tails.removeAll(keepingCapacity: true) }
        tails[key] = tail
    }

    /// `note` of a noted tail moved on to `last` (its summary and prefix unchanged), in place;
    /// false when the group has no tail.
    func advance(_ ns: String, _ group: UInt64, to last: TriggerChangeLog.Position) -> Bool {
        if let i = find(ns, group) {
            small[i].tail.last = last
            return true
        }
        let key = Key(ns: ns, group: group)
        guard tails[key] != nil else { return false }
        tails[key]?.last = last
        return true
    }

    func forget(_ ns: String, _ group: UInt64) {
        if let i = find(ns, group) { small.remove(at: i) }
        tails[Key(ns: ns, group: group)] = nil
    }

    func forgetAll() {
        small.removeAll(keepingCapacity: true)
        tails.removeAll()
    }

    var isEmpty: Bool { small.isEmpty && tails.isEmpty }
}
