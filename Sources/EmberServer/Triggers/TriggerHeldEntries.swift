/// The log indexes a delivery lane settled whose cursor is not logged yet (`TriggerLane`): a
/// read of the outbox must not take them again. They are added and logged in log order (the
/// lane's settles come in order and its cursors are logged first in, first out), so they are
/// kept as an ascending array with a start: adding appends, a logged run leaves from the front
/// and a lookup is a binary search — no hashing per entry, three times per event a busy lane
/// delivers. Anything out of that order (not expected) still gives the same answers.
struct TriggerHeldEntries {
    private var items: [UInt64] = []
    private var start = 0

    var isEmpty: Bool { start == items.count }
    var count: Int { items.count - start }
    /// The highest index held.
    var max: UInt64? { isEmpty ? nil : items[items.count - 1] }

    func contains(_ index: UInt64) -> Bool {
        guard let at = position(index) else { return false }
        return items[at] == index
    }

    mutating func add(_ indexes: [UInt64]) {
        for i in indexes {
            if isEmpty || i > items[items.count - 1] {
                items.append(i)
            } else if !contains(i) {
                items.insert(i, at: position(i) ?? items.count)
            }
        }
    }

    mutating func remove(_ indexes: [UInt64]) {
        if indexes.count <= count && items[start..<(start + indexes.count)].elementsEqual(indexes) {
            start += indexes.count
        } else {
            let gone = Set(indexes)
            items = items[start...].filter { !gone.contains($0) }
            start = 0
        }
        if start == items.count {
            items.removeAll(keepingCapacity: true)
            start = 0
        } else if start > 1_024 && start * 2 > items.count {
            items.removeFirst(start)
            start = 0
        }
    }

    private func position(_ index: UInt64) -> Int? { items.position(notBelow: index, from: start) }
}

extension Array where Element == UInt64 {
    /// In an ascending array, the first place at or after `start` whose value is not below
    /// `value` (binary search); nil past the end.
    func position(notBelow value: UInt64, from start: Int) -> Int? {
        var lo = start, hi = count
        while lo < hi {
            let mid = (lo + hi) / 2
            if self[mid] < value { lo = mid + 1 } else { hi = mid }
        }
        return lo < count ? lo : nil
    }
}
