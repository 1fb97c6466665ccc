import EmberCore

/// The events a delivery lane took from the outbox and has not settled, by log entry
/// (`TriggerLane`). Entries are taken in log order and settled from the oldest, so they are
/// kept as two ascending arrays with a start: taking appends, settling leaves from the front, a
/// lookup is a binary search and a POST's events (consecutive entries) are found by walking
/// forward from its first — no hashing per event (a dictionary by index was looked up once per
/// event a POST carries and once per entry taken and settled). Anything out of that order (not
/// expected) still gives the same answers.
struct TriggerLaneEvents {
    private var indexes: [UInt64] = []
    private var entries: [[TriggerEvent]] = []
    private var start = 0

    init() {}

    /// The entries of `held` (tests; the lane takes them from reads).
    init(_ held: [UInt64: [TriggerEvent]]) {
        for (i, e) in held.sorted(by: { $0.key < $1.key }) { self[i] = e }
    }

    var isEmpty: Bool { start == indexes.count }
    var count: Int { indexes.count - start }

    /// The events of entry `index`, if held; setting nil forgets them.
    subscript(index: UInt64) -> [TriggerEvent]? {
        get {
            guard let at = position(index), indexes[at] == index else { return nil }
            return entries[at]
        }
        set {
            if let newValue {
                if isEmpty || index > indexes[indexes.count - 1] {
                    indexes.append(index)
                    entries.append(newValue)
                } else if let at = position(index), indexes[at] == index {
                    entries[at] = newValue
                } else {
                    let at = position(index) ?? indexes.count
                    indexes.insert(index, at: at)
                    entries.insert(newValue, at: at)
                }
            } else {
                forget([index])
            }
        }
    }

    /// Forgets these entries (settled: usually the oldest held, in order).
    mutating func forget(_ gone: [UInt64]) {
        if gone.isEmpty { return }
        var k = 0
        while k < gone.count, start < indexes.count, indexes[start] == gone[k] {
            entries[start] = []
            start += 1
            k += 1
        }
        while k < gone.count {
            if let at = position(gone[k]), indexes[at] == gone[k] {
                indexes.remove(at: at)
                entries.remove(at: at)
            }
            k += 1
        }
        if start == indexes.count {
            indexes.removeAll(keepingCapacity: true)
            entries.removeAll(keepingCapacity: true)
            start = 0
        } else if start > 1_024 && start * 2 > indexes.count {
            indexes.removeFirst(start)
            entries.removeFirst(start)
            start = 0
        }
    }

    mutating func removeAll() {
        indexes.removeAll(keepingCapacity: true)
        entries.removeAll(keepingCapacity: true)
        start = 0
    }

    /// Calls `body` with each item's event, in the items' order, read in place through a
    /// pointer (an event handed to a closure as a value is copied whole, every part retained and
    /// released); an item whose event is not held is skipped. `items` in log order, as a POST's
    /// are, are found by one search for the first and a walk forward from it.
    func forEach(_ items: [TriggerDelivery.Event], _ body: (Int, UnsafePointer<TriggerEvent>) -> Void) {
        guard !items.isEmpty else { return }
        var at = position(items[0].index) ?? indexes.count
        entries.withUnsafeBufferPointer { all in
            for (k, item) in items.enumerated() {
                if at >= indexes.count || indexes[at] > item.index {
                    // Out of order (not expected): search.
                    guard let p = position(item.index) else { continue }
                    at = p
                }
                while at < indexes.count && indexes[at] < item.index { at += 1 }
                guard at < indexes.count, indexes[at] == item.index else { continue }
                all[at].withUnsafeBufferPointer { evs in
                    if let e = TriggerLane.place(item.seq, in: evs) { body(k, evs.baseAddress! + e) }
                }
            }
        }
    }

    /// The event of `item`, copied out (`TriggerBodyCache` keeps what it is given).
    func event(_ item: TriggerDelivery.Event) -> TriggerEvent? {
        guard let at = position(item.index), indexes[at] == item.index else { return nil }
        return entries[at].withUnsafeBufferPointer { evs in TriggerLane.place(item.seq, in: evs).map { evs[$0] } }
    }

    /// The first place at or after `start` whose index is not below `index`; nil past the end.
    private func position(_ index: UInt64) -> Int? { indexes.position(notBelow: index, from: start) }
}
