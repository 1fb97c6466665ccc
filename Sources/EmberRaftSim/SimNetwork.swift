// Simulated network: loss, delay (hence reordering), duplication and partitions.

import EmberRaft

/// What a simulated network carries: anything with a sender and a receiver.
public protocol SimAddressed: Sendable {
    var from: NodeID { get }
    var to: NodeID { get }
}

extension Message: SimAddressed {}

public struct SimNetwork<M: SimAddressed>: Sendable {
    /// Messages bucketed by delivery time.
    private var inFlight: [Int: [M]] = [:]
    /// Per-link FIFO (`fifo`): the latest delivery time scheduled on each link, as a TCP
    /// connection delivers (a lost message is a dropped connection's frames, not a reordering).
    private var lastDelivery: [String: Int] = [:]
    /// Deliver each link's messages in the order sent, and never duplicate (peer links are TCP).
    public var fifo = false
    /// Partition group per node; messages only flow within a group.
    public var group: [NodeID: Int] = [:]
    public private(set) var sent = 0
    public private(set) var dropped = 0

    public init() {}

    public var isPartitioned: Bool { Set(group.values).count > 1 }

    public mutating func heal() { group = [:] }

    public func connected(_ a: NodeID, _ b: NodeID) -> Bool { (group[a] ?? 0) == (group[b] ?? 0) }

    public mutating func send(_ m: M, now: Int, options: SimOptions, rng: inout SplitMix64, lossless: Bool) {
        sent += 1
        if !lossless && rng.chance(options.lossRate) {
            dropped += 1
            return
        }
        let copies = !fifo && !lossless && rng.chance(options.duplicateRate) ? 2 : 1
        for _ in 0..<copies {
            var delay = 1 + rng.below(options.maxDelay)
            if !lossless && rng.chance(options.longDelayRate) { delay += rng.below(options.maxDelay * 8) }
            var at = now + delay
            if fifo {
                let link = m.from + ">" + m.to
                at = max(at, lastDelivery[link] ?? 0)
                lastDelivery[link] = at
            }
            inFlight[at, default: []].append(m)
        }
    }

    /// Whether a message to `node` is due at `time` (a host's "more input waiting").
    public func hasDue(at time: Int, to node: NodeID) -> Bool {
        inFlight[time]?.contains { $0.to == node } ?? false
    }

    /// Removes and returns the messages due at `now`, shuffled (same-time deliveries race).
    public mutating func due(at now: Int, rng: inout SplitMix64) -> [M] {
        guard var batch = inFlight.removeValue(forKey: now) else { return [] }
        if batch.count > 1 && !fifo {
            for i in stride(from: batch.count - 1, to: 0, by: -1) { batch.swapAt(i, rng.below(i + 1)) }
        }
        return batch
    }
}
