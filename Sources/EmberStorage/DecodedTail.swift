/// Log entries appended and not yet applied, kept as they were decoded when appended, so that
/// applying them does not read them back from the log and decode them again (a Raft node applies
/// an entry a turn or more after appending it; decoding — paths, values — was ~4% of a node's
/// CPU per write, paid twice). Writer thread only. It is told of entries only after the
/// transaction that logged them committed, so it never holds an entry the log does not; an
/// entry it does not hold is read from the log as before.
struct DecodedTail {
    /// Entries kept at most (older ones are read from the log when applied).
    static let maxEntries = 4_096

    /// Contiguous by index from `entries[head]`.
    private var entries: [LogEntry] = []
    private var head = 0

    var count: Int { entries.count - head }

    private var range: Range<UInt64>? {
        guard head < entries.count else { return nil }
        let first = entries[head].index
        return first..<(first + UInt64(count))
    }

    /// The entry logged at `index`, if kept.
    func entry(at index: UInt64) -> LogEntry? {
        guard let r = range, r.contains(index) else { return nil }
        let e = entries[head + Int(index - r.lowerBound)]
        assert(e.index == index, "kept entries are contiguous")
        return e
    }

    /// `new` (contiguous) was logged: it replaces any kept entries from its first index on.
    mutating func appended(_ new: [LogEntry]) {
        guard let first = new.first?.index else { return }
        if let r = range {
            if first < r.lowerBound || first > r.upperBound {
                removeAll()  // not adjacent to what is kept: start again from these
            } else if first < r.upperBound {
                entries.removeLast(Int(r.upperBound - first))  // a conflicting suffix was replaced
            }
        }
        if head == entries.count { removeAll() }
        entries += new
        if count > Self.maxEntries { head += count - Self.maxEntries }
        compact()
    }

    /// Entries through `index` were applied: they are not needed any more.
    mutating func applied(through index: UInt64) {
        while head < entries.count && entries[head].index <= index { head += 1 }
        compact()
    }

    mutating func removeAll() {
        entries.removeAll(keepingCapacity: true)
        head = 0
    }

    /// Drops the applied prefix once it is most of the array (amortised O(1) per entry).
    private mutating func compact() {
        if head == entries.count {
            removeAll()
        } else if head > 64 && head * 2 > entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }
}
