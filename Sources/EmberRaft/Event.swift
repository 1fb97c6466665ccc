// Inputs to the state machine.

public enum Event: Sendable, Hashable {
    /// Logical clock tick. The host calls this at a fixed interval.
    case tick
    /// A message from a peer.
    case receive(Message)
    /// Append an application command (leader only; otherwise rejected with a leader hint).
    case propose([UInt8])
    /// Append several application commands, in order, as one proposal: one `.proposalAccepted`
    /// per command (consecutive indexes), or one `.proposalRejected` per command when none could
    /// be appended. Followers get them in one AppendEntries (as far as the message limits
    /// allow) instead of one message per command, and answer once. Must not be empty.
    case proposeBatch([[UInt8]])
    /// Propose a single-server membership change (leader only, one pending at a time).
    /// `context` is opaque host data stored in the config entry after the voter set (e.g. the
    /// members' addresses), so every replica learns it with the change; see `ConfigEntry`.
    case proposeConfigChange(ConfigChange, context: [UInt8] = [])
    /// Linearizable read request. The host picks `id` (unique per node); the answer is a
    /// `.readReady(id:index:)` or `.readFailed(id:)` action. A follower forwards the request to
    /// the leader; if that message or its answer is lost no action ever comes, so hosts should
    /// time reads out and retry.
    case readIndex(id: UInt64)
    /// Ask the leader to hand leadership to `to` (thesis 3.10).
    case transferLeadership(to: NodeID)
    /// The host's state machine covers everything up to `index` (must be <= appliedIndex): Raft
    /// drops entries up to it (at most up to a snapshot still being streamed to an active
    /// follower) and emits `.persistSnapshot`. No bytes: the state machine is its own snapshot.
    case compact(index: UInt64)
    /// Answer to `.prepareSnapshot`: the host holds a readable image (`size` bytes) of its state
    /// machine as of `index` (<= appliedIndex). Ignored when `index` is already compacted away.
    case snapshotReady(index: UInt64, size: Int)
    /// The host made the log durable through `index`, whose entry has `term` (HOST CONTRACT 2b).
    /// A leader counts its own log as matching only through the latest such index. Stale reports
    /// (the log was truncated and `index` now holds another term) are ignored.
    case persisted(through: UInt64, term: UInt64)
    /// Leader: send learners the committed entries held for a bigger batch
    /// (`RaftConfig.learnerBatchMinEntries`). A host fires it a short while after a turn left
    /// `RaftNode.learnerSendsHeld` true; the leader's tick sends them too (a host without such
    /// a timer). Ignored by other roles and when nothing is held.
    case flushLearners
    /// Start an election now (e.g. to bootstrap a test quickly). Ignored by leaders and non-voters
    /// (learners included).
    case campaign
    /// A member told the host that a configuration at `configIndex`, committed and without this
    /// node, exists: we were removed while we could not hear of it (a removed node is no longer
    /// replicated to, so Raft messages alone never tell it). The node stops campaigning until its
    /// log holds a configuration at least that new (one re-adding it, if ever). Ignored unless
    /// `configIndex` is newer than the node's own configuration. The host checks that the
    /// configuration is committed and excludes us; nothing here can verify that.
    case removedFromCluster(configIndex: UInt64)
}

/// Why a proposal was not appended.
public enum ProposalRejection: Sendable, Hashable {
    /// This node is not the leader; `leaderHint` is the leader it knows of, if any.
    case notLeader(leaderHint: NodeID?)
    /// A leadership transfer is in progress; retry at the new leader.
    case transferInProgress
    /// Another membership change is still uncommitted, or the leader has not yet committed an
    /// entry of its own term (required for safe single-server changes).
    case configChangePending
    /// The change would not alter membership (adding a member or removing a non-member).
    case configChangeNoop
    /// Adding a learner would exceed `RaftConfig.maxLearners`.
    case tooManyLearners(limit: Int)
    /// The learner to promote is `lag` entries behind the leader's log, more than
    /// `RaftConfig.maxPromotionLag` allows (or not known to hold anything: `lag` is the whole log).
    case learnerBehind(NodeID, lag: UInt64, limit: UInt64)
}
