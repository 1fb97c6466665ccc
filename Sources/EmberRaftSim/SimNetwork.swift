// Simulated network: loss, delay (hence reordering), duplication and partitions.

import EmberRaft

public struct SimNetwork: Sendable {
    /// Messages bucketed by delivery time.
    private var inFlight: [Int: [Message]] = [:]
    /// Partition group per node; messages only flow within a group.
    public var group: [NodeID: Int] = [:]
    public private(set) var sent = 0
    public private(set) var dropped = 0

    public init() {}

    public var isPartitioned: Bool { Set(group.values).count > 1 }

    public mutating func heal() { group = [:] }

    public func connected(_ a: NodeID, _ b: NodeID) -> Bool { (group[a] ?? 0) == (group[b] ?? 0) }

    public mutating func send(_ m: Message, now: Int, options: SimOptions, rng: inout SplitMix64, lossless: Bool) {
        sent += 1
        if !lossless && rng.chance(options.lossRate) {
            dropped += 1
            return
        }
        let copies = !lossless && rng.chance(options.duplicateRate) ? 2 : 1
        for _ in 0..<copies {
            var delay = 1 + rng.below(options.maxDelay)
            if !lossless && rng.chance(options.longDelayRate) { delay += rng.below(options.maxDelay * 8) }
            inFlight[now + delay, default: []].append(m)
        }
    }

    /// Removes and returns the messages due at `now`, shuffled (same-time deliveries race).
    public mutating func due(at now: Int, rng: inout SplitMix64) -> [Message] {
        guard var batch = inFlight.removeValue(forKey: now) else { return [] }
        if batch.count > 1 {
            for i in stride(from: batch.count - 1, to: 0, by: -1) { batch.swapAt(i, rng.below(i + 1)) }
        }
        return batch
    }
}
