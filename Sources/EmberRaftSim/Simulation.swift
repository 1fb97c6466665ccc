// EmberRaftSim: the seeded whole-cluster Raft simulator — simulated network and disk with
// faults, a KV model, invariant checks and a linearizability checker — that EmberRaftTests run.
// Each node is a host core (EmberRaftHost's HostCore, what the cluster runtime drives) whose
// effects the simulator performs on its disk and network.
// This file is its entry point (`Simulation`).
// Must not: be linked by the node (test support only), or use real clocks, randomness or I/O:
// a seed replays a run exactly.

import EmberRaft

public struct SimStats: Sendable, Hashable {
    public init() {}
    public var leadersElected = 0
    public var crashes = 0
    public var partitions = 0
    public var transfers = 0
    public var membershipChanges = 0
    /// Learner changes proposed (`SimOptions.learnerChangeRate`) and, of promotions, how many
    /// the leader accepted and how many it refused because the learner was behind.
    public var learnerChanges = 0
    public var promotions = 0
    public var promotionsRefusedBehind = 0
    public var demotions = 0
    /// AppendEntries with entries a leader sent to learners (committed entries only, checked).
    public var learnerAppends = 0
    /// Leader turns that ended holding a learner's entries for a bigger batch, and the host's
    /// `.flushLearners` steps that then sent them (`SimOptions.learnerFlushDelay`).
    public var learnerHolds = 0
    public var learnerFlushes = 0
    /// `SimOptions.learnersSyncLazily`: acknowledgements a learner sent with its writes still
    /// unsynced, and its crashes that lost entries it had applied (and acknowledged).
    public var learnerAcksBeforeSync = 0
    public var learnerCrashesLosingApplied = 0
    /// Runs whose linearizability search hit its step budget (counted as passing).
    public var linearizabilityInconclusive = 0
    public var compactions = 0
    public var snapshotsInstalled = 0
    /// Snapshot chunks followers staged (transfers are chunked, never whole).
    public var snapshotChunksStaged = 0
    public var messagesSent = 0
    public var committedEntries: UInt64 = 0
    /// Leader sends that went out while its own entries were still unsynced (thesis 10.2.1).
    public var sendsBeforeFsync = 0
    public var persistedReports = 0
    public var crashesBeforeFsync = 0
    /// Forwarding (`SimOptions.forwarding`): batches sent, writes in them, batches bounced by a
    /// node that did not lead, the largest batch.
    public var forwardedBatches = 0
    public var forwardedWrites = 0
    public var bouncedBatches = 0
    public var largestForwardBatch = 0
    /// Host turns that stepped several messages before performing their plan, and turns whose
    /// apply the host core carried into the next turn's write.
    public var multiInputTurns = 0
    public var deferredApplies = 0
    /// Turns that installed two snapshots (the case of RELIABILITY.md's follower crash).
    public var turnsInstallingTwoSnapshots = 0
}

public struct SimReport: Sendable, CustomStringConvertible {
    public var seed: UInt64
    public var nodeCount: Int
    public var failure: SimFailure?
    public var completedOps: Int
    public var unknownOps: Int
    public var historySize: Int
    public var stats: SimStats

    public var description: String {
        let head = "seed \(seed) (\(nodeCount) nodes): \(completedOps) ops completed, \(unknownOps) unknown, \(stats)"
        if let failure { return head + " — FAILED at \(failure)" }
        return head
    }
}

public enum Simulation {
    /// Runs one cluster simulation. The same (seed, nodeCount) always produces the same run.
    public static func run(seed: UInt64, nodeCount: Int, options: SimOptions? = nil) -> SimReport {
        let opts = options ?? SimOptions.randomized(seed: seed, nodeCount: nodeCount)
        let cluster = SimCluster(seed: seed, options: opts)
        var failure: SimFailure?
        do { try cluster.run() } catch let f as SimFailure { failure = f } catch { failure = SimFailure(message: "\(error)", time: cluster.now) }
        return SimReport(
            seed: seed, nodeCount: nodeCount, failure: failure, completedOps: cluster.completedOps,
            unknownOps: cluster.unknownOps, historySize: cluster.history.operations.count,
            stats: cluster.finalStats)
    }
}
