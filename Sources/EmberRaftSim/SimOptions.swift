// Parameters of one simulated run; `randomized` derives a varied fault profile from a seed.

import EmberRaft

public struct SimOptions: Sendable, Hashable {
    public var nodeCount = 3
    /// Ticks with faults and client traffic, followed by `settleTicks` of healed, lossless network.
    public var faultTicks = 300
    public var settleTicks = 150
    /// Simulated time units per node tick (message delays are in time units).
    public var tickInterval = 10
    public var maxDelay = 8
    public var clients = 4
    public var keys = ["a", "b", "c"]
    public var clientRequestRate = 0.05  // per idle client per time unit
    public var clientTimeout = 400  // time units
    public var lossRate = 0.02
    public var duplicateRate = 0.02
    public var longDelayRate = 0.03
    public var crashRate = 0.01  // per tick
    public var partitionRate = 0.01  // per tick
    public var transferRate = 0.005  // per tick
    /// Per tick: the leader removes a voter or adds a fresh node (single-server changes).
    public var membershipChangeRate = 0.0
    /// Learners (non-voting members) in the initial configuration, besides the `nodeCount` voters.
    public var learners = 0
    /// Per tick: the leader adds a fresh learner, removes one, promotes one (refused while it is
    /// behind) or demotes a voter (SimCluster+Learners).
    public var learnerChangeRate = 0.0
    /// Learners acknowledge and apply appended entries before they are synced; a crash loses
    /// them (a real learner's last batches after a power loss, docs/CLUSTER.md "Learners"): it
    /// comes back with less than it acknowledged, and the leader must send that again. A
    /// promoted learner syncs like any voter from the turn its promotion is appended; before,
    /// every answer is lazy, even for entries not committed yet (a real host's unsynced commits
    /// hold committed entries only): the leader must count none of them (`voterSince`).
    public var learnersSyncLazily = false
    /// How long after a turn that left a leader holding learners' entries for a bigger batch
    /// (`RaftConfig.learnerBatchMinEntries`) its host steps `.flushLearners` (time units; nil:
    /// never, the leader's tick alone sends them), as the runtime's timer does.
    public var learnerFlushDelay: Int?
    public var compactThreshold = 12  // applied entries beyond the snapshot before compacting
    public var raft = RaftConfig(electionTick: 10, heartbeatTick: 2)
    /// Deliberately broken mode for testing the checker: serve reads from the contacted node's
    /// local state without ReadIndex. Stale reads must then be caught as non-linearizable.
    public var unsafeLocalReads = false
    /// Longest a host leaves written entries unsynced when nothing forces an fsync (a leader sends
    /// its entries before writing them, thesis 10.2.1): the window a crash loses them in.
    public var maxFsyncDelay = 6
    /// Chance that a leader sending entries it has not synced yet crashes right after, before
    /// the fsync (the window thesis 10.2.1 opens; random crashes rarely land in it).
    public var crashBeforeFsyncRate = 0.0

    /// Clients write to any node; followers forward writes to the leader in batches
    /// (EmberRaft's ForwardQueue, as the cluster runtime does) over FIFO links.
    public var forwarding = false
    /// A forwarded batch unanswered this long is given up (its writes' outcome unknown).
    public var forwardTimeout = 150
    public var maxForwardBatch = 8
    /// Deliberately wrong (checker sanity tests only): a follower sends a timed-out batch again
    /// instead of reporting its writes' outcome unknown, so a write can be proposed twice.
    public var unsafeForwardRetry = false

    public init() {}

    public static func randomized(seed: UInt64, nodeCount: Int) -> SimOptions {
        var rng = SplitMix64(seed: seed ^ 0x0123_4567_89AB_CDEF)
        var o = SimOptions()
        o.nodeCount = nodeCount
        o.lossRate = [0, 0.01, 0.05, 0.1][rng.below(4)]
        o.duplicateRate = [0, 0.02, 0.05][rng.below(3)]
        o.longDelayRate = [0, 0.02, 0.1][rng.below(3)]
        o.crashRate = [0, 0.005, 0.01, 0.02][rng.below(4)]
        o.partitionRate = [0, 0.005, 0.01, 0.02][rng.below(4)]
        o.transferRate = [0, 0.005, 0.02][rng.below(3)]
        o.compactThreshold = [4, 8, 16, 64][rng.below(4)]
        o.clients = 2 + rng.below(4)
        // From its own stream, so the other draws (and every seed's profile) stay as they were.
        var fsyncRng = SplitMix64(seed: seed ^ 0x5EED_F5C0)
        o.maxFsyncDelay = [0, 3, 15, 40][fsyncRng.below(4)]
        o.crashBeforeFsyncRate = [0, 0.002, 0.01][fsyncRng.below(3)]
        // Its own stream too: seeds without forwarding run exactly as before.
        var forwardRng = SplitMix64(seed: seed ^ 0xF0_2A2D)
        o.forwarding = forwardRng.below(2) == 0
        o.maxForwardBatch = [1, 3, 16][forwardRng.below(3)]
        let preVote = rng.below(4) != 0
        // Removed servers that never learn of their removal keep campaigning; without PreVote that
        // is a known liveness hazard (thesis 4.2.3), so churn membership only with PreVote on.
        o.membershipChangeRate = preVote ? [0, 0, 0.01, 0.03][rng.below(4)] : 0
        o.raft = RaftConfig(
            electionTick: 10, heartbeatTick: 2,
            preVote: preVote, checkQuorum: rng.below(4) != 0,
            maxEntriesPerMessage: [1, 3, 8, 64][rng.below(4)],
            maxBytesPerMessage: [40, 200, 1 << 20][rng.below(3)],
            maxInflightMessages: [1, 2, 4, 32][rng.below(4)],
            snapshotChunkSize: [5, 16, 64, 4096][rng.below(4)],
            maxInflightSnapshotChunks: [1, 2, 4][rng.below(3)])
        return o
    }

    /// `randomized` plus learners: 1-3 in the initial configuration, and (with PreVote, as for
    /// voter churn) learners added, removed, promoted and voters demoted while the faults run.
    /// A small `maxPromotionLag`, so promotions are refused as often as they are let through.
    public static func withLearners(seed: UInt64, nodeCount: Int) -> SimOptions {
        var o = randomized(seed: seed, nodeCount: nodeCount)
        var rng = SplitMix64(seed: seed ^ 0x1EA2_0E25)
        o.learners = 1 + rng.below(3)
        o.learnerChangeRate = o.raft.preVote ? [0.01, 0.03, 0.06][rng.below(3)] : 0
        o.raft.maxLearners = 4
        o.raft.maxPromotionLag = [0, 4, 32][rng.below(3)]
        // Learners' own window (drawn last: the draws above stay what they were for each seed).
        o.raft.maxInflightLearnerMessages = [1, 2, 4][rng.below(3)]
        o.raft.maxEntriesPerLearnerMessage = [1, 3, 64][rng.below(3)]
        // Its own stream: every other draw stays what it was for each seed.
        var lazyRng = SplitMix64(seed: seed ^ 0x1A2_5EED)
        o.learnersSyncLazily = lazyRng.below(2) == 0
        o.raft.learnerSmallAppendsMaxEntries = Self.drawLearnerSmallAppends(seed: seed)
        o.raft.learnerAckMinEntries = Self.drawLearnerAckMinEntries(seed: seed)
        o.drawLearnerBatching(seed: seed)
        return o
    }

    /// Learner batching (`RaftConfig.learnerBatchMinEntries`): off, 2, emberd's default 3
    /// (`ClusterConfiguration.defaultLearnerBatchEntries`, on since session 21), 4 or the
    /// runtime's 32 entries, flushed by the host after 1-8 time units or only on the leader's
    /// tick; its own stream, so every other draw of a seed stays what it was.
    mutating func drawLearnerBatching(seed: UInt64) {
        var rng = SplitMix64(seed: seed ^ 0xBA7C_4ED5)
        raft.learnerBatchMinEntries = [0, 2, 3, 4, RaftConfig.defaultLearnerAckMinEntries][rng.below(5)]
        learnerFlushDelay = [nil, 1, 3, 8][rng.below(4)]
    }

    /// How many entries a learner answers at once (`RaftConfig.learnerAckMinEntries`): every
    /// append, 2, 4 or the default (32: most answers then go on a tick or before a heartbeat's
    /// answer, and above the leader's small-appends window when that is 0 or 1); its own stream.
    static func drawLearnerAckMinEntries(seed: UInt64) -> Int {
        var rng = SplitMix64(seed: seed ^ 0xAC_4ED5)
        return [0, 2, 4, RaftConfig.defaultLearnerAckMinEntries][rng.below(4)]
    }

    /// Small appends in flight to a learner (`RaftConfig.learnerSmallAppendsMaxEntries`): none
    /// beyond the window, one, or the default; from a stream of its own, so every other draw of
    /// a seed stays what it was.
    static func drawLearnerSmallAppends(seed: UInt64) -> Int {
        var rng = SplitMix64(seed: seed ^ 0x25EC_0A99)
        return [0, 1, RaftConfig.defaultLearnerSmallAppendsMaxEntries][rng.below(3)]
    }

    /// The leader-churn profile with learners changing (and being promoted) all the time.
    public static func learnersUnderLeaderChurn(seed: UInt64, nodeCount: Int) -> SimOptions {
        var o = leaderChurn(seed: seed, nodeCount: nodeCount)
        var rng = SplitMix64(seed: seed ^ 0x1EA2_C4A2)
        o.raft.preVote = true  // removed and demoted servers that do not know it yet campaign otherwise
        o.learners = 1 + rng.below(2)
        o.learnerChangeRate = 0.08
        o.raft.maxLearners = 3
        o.raft.maxPromotionLag = [2, 16][rng.below(2)]
        o.raft.maxInflightLearnerMessages = 1 + rng.below(2)
        o.raft.maxEntriesPerLearnerMessage = [1, 8][rng.below(2)]
        var lazyRng = SplitMix64(seed: seed ^ 0x1A2_5EED)
        o.learnersSyncLazily = lazyRng.below(2) == 0
        o.raft.learnerSmallAppendsMaxEntries = Self.drawLearnerSmallAppends(seed: seed)
        o.raft.learnerAckMinEntries = Self.drawLearnerAckMinEntries(seed: seed)
        return o
    }

    /// A harsher profile with frequent leader changes and one-entry messages, which is what
    /// commit-rule bugs (Raft Figure 8) need to surface.
    public static func leaderChurn(seed: UInt64, nodeCount: Int) -> SimOptions {
        var o = randomized(seed: seed, nodeCount: nodeCount)
        var rng = SplitMix64(seed: seed ^ 0xFEED_FACE)
        o.lossRate = [0.02, 0.05, 0.1][rng.below(3)]
        o.partitionRate = 0.05
        o.transferRate = 0.03
        o.crashRate = 0.02
        o.longDelayRate = 0.05
        o.clientRequestRate = 0.1
        o.raft.maxEntriesPerMessage = 1
        o.raft.maxInflightMessages = 1 + rng.below(2)
        return o
    }
}
