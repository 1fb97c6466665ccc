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
        /// The stream's key after the index (`TriggerRecordRows.stream`), built once for its writes.
        var prefix: [UInt8]
        /// Its head's `prunedThrough` (kept with the head).
        var prunedThrough: UInt64 = 0
        /// Whether its head in the store is behind `last` (`takeOwedHeads`).
        var headOwed = false
    }

    /// Named limit: groups remembered per transaction (past it a group is not remembered: read
    /// from the store as before, its head written with each record).
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

    /// Notes the group's tail; false when the table is full (`maxGroups`) and it is not noted:
    /// the caller then writes its head itself (a table starting over would drop owed heads).
    @discardableResult
    func note(_ ns: String, _ group: UInt64, _ tail: Tail) -> Bool {
        if let i = find(ns, group) { small[i].tail = tail; return true }
        if small.count < Self.smallGroups && tails.isEmpty {
            small.append(Entry(ns: ns, group: group, tail: tail))
            hint = small.count - 1
            return true
        }
        let key = Key(ns: ns, group: group)
        if tails.count >= Self.maxGroups && tails[key] == nil { return false }
        tails[key] = tail
        return true
    }

    /// `note` of a noted tail moved on to `last` (its summary and prefix unchanged, its head
    /// owed), in place; false when the group has no tail.
    func advance(_ ns: String, _ group: UInt64, to last: TriggerChangeLog.Position) -> Bool {
        if let i = find(ns, group) {
            small[i].tail.last = last
            small[i].tail.headOwed = true
            return true
        }
        let key = Key(ns: ns, group: group)
        guard tails[key] != nil else { return false }
        tails[key]?.last = last
        tails[key]?.headOwed = true
        return true
    }

    /// Forgets the group's tail; returns it when its head is owed (the caller writes it).
    @discardableResult
    func forget(_ ns: String, _ group: UInt64) -> Tail? {
        var gone: Tail?
        if let i = find(ns, group) { gone = small.remove(at: i).tail }
        if let t = tails.removeValue(forKey: Key(ns: ns, group: group)) { gone = t }
        return gone?.headOwed == true ? gone : nil
    }

    /// Forgets every tail; returns those whose heads are owed.
    @discardableResult
    func forgetAll() -> [Tail] {
        let owed = takeOwedHeads()
        small.removeAll(keepingCapacity: true)
        tails.removeAll()
        return owed
    }

    /// The tails whose heads are owed, marked written: a group's head is written once per
    /// transaction (when it ends or its tail is forgotten), not with each of its records.
    func takeOwedHeads() -> [Tail] {
        var owed: [Tail] = []
        for i in small.indices where small[i].tail.headOwed {
            owed.append(small[i].tail)
            small[i].tail.headOwed = false
        }
        for (k, t) in tails where t.headOwed {
            owed.append(t)
            tails[k]?.headOwed = false
        }
        return owed
    }

    var isEmpty: Bool { small.isEmpty && tails.isEmpty }
}
