// Tunables for a Raft node. Times are in host ticks (the host decides what a tick is).

public struct RaftConfig: Sendable, Hashable {
    /// Followers start an election after a randomized timeout in [electionTick, 2*electionTick).
    public var electionTick: Int
    /// Leaders send heartbeats every `heartbeatTick` ticks. Must be well below `electionTick`.
    public var heartbeatTick: Int
    /// Run a pre-vote round before incrementing the term (thesis 9.6).
    public var preVote: Bool
    /// Leaders step down without contact from a quorum for an election timeout; followers in
    /// contact with a leader ignore vote requests (leader lease, thesis 6.2/4.2.3).
    public var checkQuorum: Bool
    /// Upper bound on entries in one AppendEntries message.
    public var maxEntriesPerMessage: Int
    /// Upper bound on (approximate) payload bytes in one AppendEntries message; at least one entry is always sent.
    public var maxBytesPerMessage: Int
    /// Maximum number of unacknowledged AppendEntries messages per follower while pipelining.
    public var maxInflightMessages: Int
    /// Unacknowledged AppendEntries per learner. A learner is sent committed entries only and
    /// counts toward no quorum, so nothing waits on how soon one batch follows another: with one
    /// in flight, what commits while the learner applies the last batch goes in the next one
    /// (self-clocked batching). At a low write rate each commit still goes out at once; under
    /// load a learner gets fewer, bigger appends — fewer frames and TLS records for the leader
    /// to send, acknowledgements for it to handle, and transactions for the learner.
    public var maxInflightLearnerMessages: Int
    /// Upper bound on entries in one AppendEntries to a learner (`maxBytesPerMessage` still
    /// applies): large enough that one batch per round trip keeps up with the leader.
    public var maxEntriesPerLearnerMessage: Int
    /// While the entries a learner has not acknowledged are at most this many (0: never), up to
    /// this many appends may be in flight to it beyond `maxInflightLearnerMessages`. At a low
    /// write rate what commits while the learner's last appends are unanswered goes at once
    /// instead of waiting for an answer, which a leader takes only between its own writes (one
    /// fsync later; issue 38: ~2-5 ms on a learner's listener at 1,000 writes/s) and a learner
    /// gives for several appends together (`learnerAckMinEntries`). Under load the append in
    /// flight is bigger than this and batching stays self-clocked.
    public var learnerSmallAppendsMaxEntries: Int
    /// A learner answers an append at once only when at least this many entries are
    /// unanswered (0: every append at once); smaller appends are answered together, at the
    /// latest on its next tick or before its answer to the leader's next heartbeat. Its answers
    /// hold up nothing (a learner counts toward no quorum): the leader needs them for flow
    /// control, promotion and retransmission, and each one costs it a receive and a turn
    /// (issue 38: one per commit at a low write rate). Keep it at most
    /// `learnerSmallAppendsMaxEntries`, so the leader's window for small appends never waits
    /// for the learner's tick.
    public var learnerAckMinEntries: Int
    /// Fewer committed entries than this not yet sent to a learner are held (0: never): they go
    /// once this many are pending, on `Event.flushLearners` (a host's short timer, armed while
    /// `RaftNode.learnerSendsHeld`), or on the leader's next tick. At a low write rate a learner
    /// then wakes, applies and commits once per several commits instead of once each (issue 38:
    /// each such batch cost a learner ~0.25 ms of CPU, on the cores the voters' next quorum
    /// round trip ran on); under load every append is bigger than this and goes as before.
    public var learnerBatchMinEntries: Int
    /// Bytes of snapshot data per InstallSnapshot chunk.
    public var snapshotChunkSize: Int
    /// Unacknowledged snapshot chunks per follower (bounds the host's read-ahead and memory).
    public var maxInflightSnapshotChunks: Int
    /// Seed for the deterministic generator that randomizes election timeouts.
    public var randomSeed: UInt64
    /// Most learners (non-voting members) a configuration may hold: each one is another stream
    /// of AppendEntries (and of snapshots) from the leader.
    public var maxLearners: Int
    /// A learner is promoted only while at most this many entries behind the leader's log: a
    /// voter further behind would hold the commit quorum back until it caught up.
    public var maxPromotionLag: UInt64

    public static let defaultMaxEntriesPerMessage = 64
    public static let defaultMaxBytesPerMessage = 1 << 20
    public static let defaultMaxInflightMessages = 32
    public static let defaultMaxInflightLearnerMessages = 1
    public static let defaultMaxEntriesPerLearnerMessage = 2_048
    public static let defaultLearnerSmallAppendsMaxEntries = 64
    public static let defaultLearnerAckMinEntries = 32
    /// Off in the core: holding is safe only for a host that steps `.flushLearners` on a timer
    /// (else held entries wait for the tick); emberd turns it on (`ClusterConfiguration
    /// .defaultLearnerBatchEntries`) and the simulator draws it on for most seeds.
    public static let defaultLearnerBatchMinEntries = 0
    public static let defaultSnapshotChunkSize = 1 << 20
    public static let defaultMaxInflightSnapshotChunks = 4
    public static let defaultMaxLearners = 8
    public static let defaultMaxPromotionLag: UInt64 = 1_000

    public init(
        electionTick: Int = 10,
        heartbeatTick: Int = 1,
        preVote: Bool = true,
        checkQuorum: Bool = true,
        maxEntriesPerMessage: Int = RaftConfig.defaultMaxEntriesPerMessage,
        maxBytesPerMessage: Int = RaftConfig.defaultMaxBytesPerMessage,
        maxInflightMessages: Int = RaftConfig.defaultMaxInflightMessages,
        maxInflightLearnerMessages: Int = RaftConfig.defaultMaxInflightLearnerMessages,
        maxEntriesPerLearnerMessage: Int = RaftConfig.defaultMaxEntriesPerLearnerMessage,
        learnerSmallAppendsMaxEntries: Int = RaftConfig.defaultLearnerSmallAppendsMaxEntries,
        learnerAckMinEntries: Int = RaftConfig.defaultLearnerAckMinEntries,
        learnerBatchMinEntries: Int = RaftConfig.defaultLearnerBatchMinEntries,
        snapshotChunkSize: Int = RaftConfig.defaultSnapshotChunkSize,
        maxInflightSnapshotChunks: Int = RaftConfig.defaultMaxInflightSnapshotChunks,
        randomSeed: UInt64 = 0,
        maxLearners: Int = RaftConfig.defaultMaxLearners,
        maxPromotionLag: UInt64 = RaftConfig.defaultMaxPromotionLag
    ) {
        precondition(electionTick > heartbeatTick && heartbeatTick > 0, "need electionTick > heartbeatTick > 0")
        precondition(maxEntriesPerMessage > 0 && maxBytesPerMessage > 0 && maxInflightMessages > 0)
        precondition(snapshotChunkSize > 0 && maxInflightSnapshotChunks > 0)
        precondition(maxInflightLearnerMessages > 0 && maxEntriesPerLearnerMessage > 0 && learnerSmallAppendsMaxEntries >= 0)
        precondition(learnerAckMinEntries >= 0 && learnerBatchMinEntries >= 0)
        self.electionTick = electionTick
        self.heartbeatTick = heartbeatTick
        self.preVote = preVote
        self.checkQuorum = checkQuorum
        self.maxEntriesPerMessage = maxEntriesPerMessage
        self.maxBytesPerMessage = maxBytesPerMessage
        self.maxInflightMessages = maxInflightMessages
        self.maxInflightLearnerMessages = maxInflightLearnerMessages
        self.maxEntriesPerLearnerMessage = maxEntriesPerLearnerMessage
        self.learnerSmallAppendsMaxEntries = learnerSmallAppendsMaxEntries
        self.learnerAckMinEntries = learnerAckMinEntries
        self.learnerBatchMinEntries = learnerBatchMinEntries
        self.snapshotChunkSize = snapshotChunkSize
        self.maxInflightSnapshotChunks = maxInflightSnapshotChunks
        self.randomSeed = randomSeed
        precondition(maxLearners >= 0)
        self.maxLearners = maxLearners
        self.maxPromotionLag = maxPromotionLag
    }
}
