// The node's in-memory view of its log: the latest compaction point (snapshot metadata; the
// state machine's bytes live with the host) plus every entry after it.
//
// Design choice: the state machine keeps the whole retained log (since the last compaction) in
// memory and tells the host what to persist via actions; it never reads storage. The host bounds
// memory by compacting (Event.compact) regularly. On restart the host hands back what it persisted
// (`PersistentState`).

public struct RaftLog: Sendable, Hashable {
    public private(set) var snapshot: SnapshotMetadata
    /// entries[i].index == snapshot.index + 1 + i
    public private(set) var entries: [LogEntry]
    /// The entries' `approximateSize`s summed: the host bounds the retained log by bytes as well
    /// as by count (a bulk import's entries are MBs each).
    public private(set) var byteCount: Int

    init(snapshot: SnapshotMetadata, entries: [LogEntry]) {
        for (i, e) in entries.enumerated() {
            precondition(e.index == snapshot.index + 1 + UInt64(i), "persisted entries must be contiguous after the snapshot")
        }
        self.snapshot = snapshot
        self.entries = entries
        byteCount = entries.reduce(0) { $0 + $1.approximateSize }
    }

    /// Index of the last entry covered by the snapshot.
    public var snapshotIndex: UInt64 { snapshot.index }
    /// First index still available as an entry.
    public var firstIndex: UInt64 { snapshotIndex + 1 }
    public var lastIndex: UInt64 { snapshotIndex + UInt64(entries.count) }
    public var lastTerm: UInt64 { entries.last?.term ?? snapshot.term }

    /// Term of the entry at `index`, or nil when compacted away or beyond the end.
    public func term(at index: UInt64) -> UInt64? {
        if index == snapshotIndex { return snapshot.term }
        guard index > snapshotIndex, index <= lastIndex else { return nil }
        return entries[Int(index - firstIndex)].term
    }

    public func entry(at index: UInt64) -> LogEntry? {
        guard index > snapshotIndex, index <= lastIndex else { return nil }
        return entries[Int(index - firstIndex)]
    }

    /// Entries in [from, through], inclusive; `from` must be available.
    public func entries(from: UInt64, through: UInt64) -> ArraySlice<LogEntry> {
        guard from <= through else { return [] }
        precondition(from >= firstIndex && through <= lastIndex, "range not in log")
        return entries[Int(from - firstIndex)...Int(through - firstIndex)]
    }

    /// Up to `maxCount` entries starting at `from` and ending at `through` at the latest,
    /// stopping once `maxBytes` is exceeded (always at least one entry if any exist, so huge
    /// entries still make progress).
    func entries(from: UInt64, maxCount: Int, maxBytes: Int, through: UInt64 = .max) -> [LogEntry] {
        guard from >= firstIndex, from <= min(lastIndex, through) else { return [] }
        var out: [LogEntry] = []
        var bytes = 0
        var i = Int(from - firstIndex)
        let end = Int(min(lastIndex, through) - firstIndex) + 1
        while i < end, out.count < maxCount {
            let size = entries[i].approximateSize
            if !out.isEmpty && bytes + size > maxBytes { break }
            bytes += size
            out.append(entries[i])
            i += 1
        }
        return out
    }

    /// Raft's "at least as up-to-date" comparison (paper 5.4.1).
    func isUpToDate(lastIndex otherIndex: UInt64, lastTerm otherTerm: UInt64) -> Bool {
        otherTerm > lastTerm || (otherTerm == lastTerm && otherIndex >= lastIndex)
    }

    func matches(index: UInt64, term: UInt64) -> Bool { self.term(at: index) == term }

    /// Last index whose term is <= `term` searching back from `from` (used for conflict hints).
    func lastIndex(withTermAtMost term: UInt64, from: UInt64) -> UInt64 {
        var i = min(from, lastIndex)
        while i > snapshotIndex, let t = self.term(at: i), t > term { i -= 1 }
        return i
    }

    /// First index of the run of entries with the same term as `index`, stopping at the snapshot.
    func firstIndexOfTerm(at index: UInt64) -> UInt64 {
        guard let t = term(at: index) else { return index }
        var i = index
        while i > firstIndex, term(at: i - 1) == t { i -= 1 }
        return i
    }

    /// Appends `newEntries`, which must start at or before lastIndex + 1; anything at or after the
    /// first new index is replaced.
    mutating func truncateAndAppend(_ newEntries: [LogEntry]) {
        guard let first = newEntries.first else { return }
        precondition(first.index > snapshotIndex && first.index <= lastIndex + 1, "append would leave a gap")
        let cut = Int(first.index - firstIndex)
        byteCount -= entries[cut...].reduce(0) { $0 + $1.approximateSize }
        entries.removeLast(entries.count - cut)
        entries.append(contentsOf: newEntries)
        byteCount += newEntries.reduce(0) { $0 + $1.approximateSize }
    }

    /// Drops entries up to `index` (inclusive): the host's state machine covers them.
    mutating func compact(to snapshot: SnapshotMetadata) {
        let index = snapshot.index
        precondition(index > snapshotIndex && index <= lastIndex, "compaction index out of range")
        assert(term(at: index) == snapshot.term)
        let dropped = Int(index - snapshotIndex)
        byteCount -= entries[..<dropped].reduce(0) { $0 + $1.approximateSize }
        entries.removeFirst(dropped)
        self.snapshot = snapshot
    }

    /// Replaces the whole log with a snapshot received from the leader.
    mutating func restore(_ snapshot: SnapshotMetadata) {
        self.snapshot = snapshot
        entries = []
        byteCount = 0
    }

    /// The voter set in effect at `index` (config entries take effect when appended).
    public func membership(at index: UInt64) -> Membership {
        var i = min(index, lastIndex)
        while i > snapshotIndex {
            let e = entries[Int(i - firstIndex)]
            if e.kind == .configChange, let c = ConfigEntry(decoding: e.data) { return c.membership }
            i -= 1
        }
        return snapshot.membership
    }

    /// Index of the latest config-change entry at or before `index`, or the snapshot index.
    func lastConfigIndex(atOrBefore index: UInt64) -> UInt64 {
        var i = min(index, lastIndex)
        while i > snapshotIndex {
            if entries[Int(i - firstIndex)].kind == .configChange { return i }
            i -= 1
        }
        return snapshotIndex
    }
}
