import EmberCore

/// The cluster as the node's operations endpoints see it: a port the replicated store offers
/// (`AdminPorts.cluster`; nil on a single node), so the fronts never downcast to a store type.
public protocol ClusterControl: Sendable {
    /// Runs an operator's membership change or leadership transfer (a follower forwards it to
    /// the leader). Never throws: failures are answers (status + error).
    func admin(_ operation: ClusterAdminOperation) async -> ClusterAdminAnswer
    /// Raft role, indexes and peer links, read without touching the data (cheap enough for every
    /// probe and scrape, unlike `nodeStatus()`, which hashes the state).
    func probe() -> ClusterProbe
    /// etcd's corrupt check on demand: this member's state hash against its voters' at one
    /// applied index (`POST /.ember/check/hashes`). nil: the cluster has no such check.
    func checkHashes() async -> JSON?
}

extension ClusterControl {
    public func checkHashes() async -> JSON? { nil }
}

/// One reading of a member's Raft state and peer links.
public struct ClusterProbe: Sendable {
    public struct Peer: Sendable {
        public var connected: Bool
        public var queuedFrames: Int
        public var droppedFrames: UInt64
        /// Leader only: entries this peer's log is behind the leader's last index.
        public var lagEntries: UInt64?
        /// Leader only: committed entries the peer is not known to hold (commit − match), and
        /// how long that has been nonzero without the peer's match index advancing.
        public var commitLag: UInt64?
        public var lagStalledSeconds: Double?
        /// Seconds since a Raft message last came from this peer (nil: none since this node
        /// started). On a leader: how long a member has not answered.
        public var secondsSinceHeard: Double?

        public init(connected: Bool, queuedFrames: Int, droppedFrames: UInt64, lagEntries: UInt64? = nil,
                    commitLag: UInt64? = nil, lagStalledSeconds: Double? = nil) {
            self.connected = connected
            self.queuedFrames = queuedFrames
            self.droppedFrames = droppedFrames
            self.lagEntries = lagEntries
            self.commitLag = commitLag
            self.lagStalledSeconds = lagStalledSeconds
        }
    }

    public var id: String
    public var role: String
    public var leader: String?
    public var term: UInt64
    public var commitIndex: UInt64
    public var appliedIndex: UInt64
    public var lastIndex: UInt64
    public var peers: [String: Peer]
    /// Removed from the cluster (it learned so, or its log says so): it will not catch up.
    public var removed: Bool

    public init(id: String, role: String, leader: String?, term: UInt64, commitIndex: UInt64, appliedIndex: UInt64,
                lastIndex: UInt64, peers: [String: Peer], removed: Bool = false) {
        self.removed = removed
        self.id = id
        self.role = role
        self.leader = leader
        self.term = term
        self.commitIndex = commitIndex
        self.appliedIndex = appliedIndex
        self.lastIndex = lastIndex
        self.peers = peers
    }
}
