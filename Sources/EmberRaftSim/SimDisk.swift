// Simulated disk: writes are buffered until fsync; a crash loses whatever was not synced.

import EmberRaft

/// The host's durable state machine: an image of it as of `index` (at or after the compaction
/// point, like a real store whose tree is durable at its applied index).
public struct SimImage: Sendable, Hashable {
    public var index: UInt64
    public var data: [UInt8]

    public init(index: UInt64, data: [UInt8]) {
        self.index = index
        self.data = data
    }
}

public struct SimDisk: Sendable {
    /// What survives a crash.
    public private(set) var durable: PersistentState
    public private(set) var image: SimImage
    /// Written but not yet fsynced.
    public private(set) var pending: [(action: Action, image: SimImage?)] = []

    public init(_ initial: PersistentState) {
        durable = initial
        image = SimImage(index: initial.snapshot.index, data: [])
    }

    /// Buffers a persist action; `image` is the state machine stored with a `.persistSnapshot`.
    public mutating func write(_ action: Action, image: SimImage? = nil) { pending.append((action, image)) }

    public mutating func crash() { pending = [] }

    /// Makes every pending write durable, in order. Returns the last entry written (its index and
    /// term), which the host reports with `Event.persisted`.
    @discardableResult
    public mutating func fsync() -> (index: UInt64, term: UInt64)? {
        var last: (index: UInt64, term: UInt64)?
        for (action, newImage) in pending {
            switch action {
            case .persistHardState(let hs):
                durable.hardState = hs
            case .persistEntries(let entries):
                guard let first = entries.first else { continue }
                let base = durable.snapshot.index
                precondition(first.index > base && first.index <= base + UInt64(durable.entries.count) + 1, "gap in persisted log")
                durable.entries.removeLast(Int(base + UInt64(durable.entries.count) + 1 - first.index))
                durable.entries.append(contentsOf: entries)
                last = (entries[entries.count - 1].index, entries[entries.count - 1].term)
            case .persistSnapshot(let snap, let discardLog):
                let base = durable.snapshot.index
                if discardLog {
                    durable.entries = []
                } else {
                    let drop = Int(min(UInt64(durable.entries.count), snap.index - base))
                    durable.entries.removeFirst(drop)
                }
                durable.snapshot = snap
                if let newImage { image = newImage }
            default:
                preconditionFailure("not a persist action: \(action)")
            }
        }
        pending = []
        return last
    }
}
