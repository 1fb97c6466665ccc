// Simulated disk: writes are buffered until fsync; a crash loses whatever was not synced.

public struct SimDisk: Sendable {
    /// What survives a crash.
    public private(set) var durable: PersistentState
    /// Written but not yet fsynced.
    public private(set) var pending: [Action] = []

    public init(_ initial: PersistentState) { durable = initial }

    public mutating func write(_ action: Action) { pending.append(action) }

    public mutating func crash() { pending = [] }

    /// Makes every pending write durable, in order. Returns the last entry written (its index and
    /// term), which the host reports with `Event.persisted`.
    @discardableResult
    public mutating func fsync() -> (index: UInt64, term: UInt64)? {
        var last: (index: UInt64, term: UInt64)?
        for action in pending {
            switch action {
            case .persistHardState(let hs):
                durable.hardState = hs
            case .persistEntries(let entries):
                guard let first = entries.first else { continue }
                let base = durable.snapshot.metadata.index
                precondition(first.index > base && first.index <= base + UInt64(durable.entries.count) + 1, "gap in persisted log")
                durable.entries.removeLast(Int(base + UInt64(durable.entries.count) + 1 - first.index))
                durable.entries.append(contentsOf: entries)
                last = (entries[entries.count - 1].index, entries[entries.count - 1].term)
            case .persistSnapshot(let snap, let discardLog):
                let base = durable.snapshot.metadata.index
                if discardLog {
                    durable.entries = []
                } else {
                    let drop = Int(min(UInt64(durable.entries.count), snap.metadata.index - base))
                    durable.entries.removeFirst(drop)
                }
                durable.snapshot = snap
            default:
                preconditionFailure("not a persist action: \(action)")
            }
        }
        pending = []
        return last
    }
}
