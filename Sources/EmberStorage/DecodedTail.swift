/// Log entries appended and not yet applied, kept as they were decoded when appended, so that
/// applying them does not read them back from the log and decode them again (a Raft node applies
/// an entry a turn or more after appending it; decoding — paths, values — was ~4% of a node's
/// CPU per write, paid twice). Writer thread only. It is told of entries only after the
/// transaction that logged them committed, so it never holds an entry the log does not; an
/// entry it does not hold is read from the log as before.
///
/// Bounded by count and by bytes: a bulk import's entries are MBs each, and decoded (values as
/// `JSON` trees) they take several times that; a leader appending faster than it applies kept up
/// to `maxEntries` of them (issue 42). Past either bound the newest are not kept: the ones kept
/// are the next to apply, and the rest are read from the log when their turn comes.
struct DecodedTail {
    /// Entries kept at most.
    static let maxEntries = 4_096
    /// Encoded bytes of the entries kept at most (a decoded entry takes a few times its encoding):
    /// room for what `ember import` keeps in flight (4 requests of up to 8 MiB) with a margin.
    static let maxBytes = 64 << 20

    /// Contiguous by index from `entries[head]`, each with its encoded size.
    private var entries: [(entry: LogEntry, bytes: Int)] = []
    private var head = 0
    /// Encoded bytes of `entries[head...]`.
    private(set) var bytes = 0

    var count: Int { entries.count - head }

    private var range: Range<UInt64>? {
        guard head < entries.count else { return nil }
        let first = entries[head].entry.index
        return first..<(first + UInt64(count))
    }

    /// The entry logged at `index`, if kept.
    func entry(at index: UInt64) -> LogEntry? {
        guard let r = range, r.contains(index) else { return nil }
        let e = entries[head + Int(index - r.lowerBound)].entry
        assert(e.index == index, "kept entries are contiguous")
        return e
    }

    /// `new` (contiguous, with `sizes`: their encoded sizes) was logged: it replaces any kept
    /// entries from its first index on, and is kept as far as the bounds allow.
    mutating func appended(_ new: [LogEntry], sizes: [Int]) {
        precondition(sizes.count == new.count, "one size per entry")
        guard let first = new.first?.index else { return }
        if let r = range {
            if first < r.lowerBound {
                removeAll()  // replaces everything kept: start again from these
            } else if first > r.upperBound {
                return  // past a gap (entries not kept for the bounds): the kept run stays valid
            } else if first < r.upperBound {
                // A conflicting suffix was replaced.
                let drop = Int(r.upperBound - first)
                for e in entries.suffix(drop) { bytes -= e.bytes }
                entries.removeLast(drop)
            }
        }
        if head == entries.count { removeAll() }
        for (e, size) in zip(new, sizes) {
            // The first entry is kept whatever its size: the next to apply is the one that matters.
            guard count < Self.maxEntries, count == 0 || bytes + size <= Self.maxBytes else { break }
            entries.append((entry: e, bytes: size))
            bytes += size
        }
        compact()
    }

    /// Entries through `index` were applied: they are not needed any more.
    mutating func applied(through index: UInt64) {
        while head < entries.count && entries[head].entry.index <= index {
            bytes -= entries[head].bytes
            head += 1
        }
        compact()
    }

    mutating func removeAll() {
        entries.removeAll(keepingCapacity: true)
        head = 0
        bytes = 0
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
