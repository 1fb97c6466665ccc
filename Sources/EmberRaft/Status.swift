// A read-only snapshot of a node's state for monitoring and tests.

public struct RaftStatus: Sendable, Hashable {
    public var id: NodeID
    public var role: RaftRole
    public var term: UInt64
    public var votedFor: NodeID?
    public var leaderID: NodeID?
    public var commitIndex: UInt64
    /// Highest index handed to the host via `.apply` / `.restoreSnapshot`.
    public var appliedIndex: UInt64
    public var lastIndex: UInt64
    public var snapshotIndex: UInt64
    public var membership: Membership
    /// Per-peer replication progress; only populated on the leader.
    public var progress: [NodeID: PeerProgress]
    public var leadTransferee: NodeID?
    /// Index of the entry (or snapshot) that defined `membership`.
    public var configIndex: UInt64 = 0
    /// Removed from the cluster (see `RaftNode.isRemoved`): it no longer campaigns.
    public var removed = false
    /// Times this node, a follower, advanced its commit index on the leader's durable notice
    /// (`RaftNode.inferCommit`) rather than on the leader's commit index.
    public var inferredCommits: UInt64 = 0
    /// A non-voting member (its `role` is `.follower`): it replicates but never votes or campaigns.
    public var learner = false
}
