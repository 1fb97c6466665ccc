// Core value types shared by the Raft state machine, its messages and its host.

/// A node identifier such as "n1". Stable for the lifetime of the node.
public typealias NodeID = String

/// The kind of a log entry. Only `.normal` entries carry host (application) payloads.
public enum EntryKind: UInt8, Sendable, Hashable {
    /// An application command; `data` is opaque to Raft.
    case normal
    /// A membership change; `data` is an encoded `ConfigEntry` (the full membership after the change).
    case configChange
    /// Appended by every new leader so it can commit entries of its own term promptly.
    case noop
}

/// One replicated log entry.
public struct LogEntry: Sendable, Hashable {
    public var index: UInt64
    public var term: UInt64
    public var kind: EntryKind
    public var data: [UInt8]

    public init(index: UInt64, term: UInt64, kind: EntryKind = .normal, data: [UInt8] = []) {
        self.index = index
        self.term = term
        self.kind = kind
        self.data = data
    }

    /// Approximate wire size, used to bound AppendEntries messages and the retained log by bytes.
    public var approximateSize: Int { data.count + 24 }
}

/// The state that must be durable before the node answers anyone (Raft paper, Figure 2),
/// plus the commit index so a restarted node can re-apply without waiting for a leader.
public struct HardState: Sendable, Hashable {
    public var term: UInt64
    public var votedFor: NodeID?
    public var commit: UInt64

    public init(term: UInt64 = 0, votedFor: NodeID? = nil, commit: UInt64 = 0) {
        self.term = term
        self.votedFor = votedFor
        self.commit = commit
    }
}

/// Describes the state a snapshot covers: everything up to and including `index`.
public struct SnapshotMetadata: Sendable, Hashable {
    public var index: UInt64
    public var term: UInt64
    /// The membership (voters and learners) in effect at `index`.
    public var membership: Membership

    public init(index: UInt64, term: UInt64, membership: Membership) {
        self.index = index
        self.term = term
        self.membership = membership
    }
}

/// A readable image of the leader's state machine that the host prepared (`Event.snapshotReady`):
/// Raft streams it to followers behind the retained log as byte ranges the host reads on demand
/// (`Action.sendSnapshotChunk`). Raft itself never holds snapshot bytes.
public struct SnapshotSource: Sendable, Hashable {
    public var metadata: SnapshotMetadata
    public var size: Int

    public init(metadata: SnapshotMetadata, size: Int) {
        self.metadata = metadata
        self.size = size
    }
}

/// Everything a node needs from durable storage to (re)start.
///
/// `entries` must be contiguous and start at `snapshot.index + 1`. The snapshot is only the
/// compaction point: the host's state machine is durable by itself (at an applied index at or
/// after it), so there are no snapshot bytes to hand back.
public struct PersistentState: Sendable, Hashable {
    public var hardState: HardState
    public var snapshot: SnapshotMetadata
    public var entries: [LogEntry]

    public init(hardState: HardState, snapshot: SnapshotMetadata, entries: [LogEntry]) {
        self.hardState = hardState
        self.snapshot = snapshot
        self.entries = entries
    }

    /// A brand-new member of the initial cluster: empty log, initial membership recorded at index 0.
    public static func bootstrap(voters: [NodeID], learners: [NodeID] = []) -> PersistentState {
        PersistentState(
            hardState: HardState(),
            snapshot: SnapshotMetadata(index: 0, term: 0, membership: Membership(voters: voters, learners: learners)),
            entries: [])
    }

    /// A node that will be added to an existing cluster: it knows no members and waits for the leader.
    public static var joining: PersistentState { bootstrap(voters: []) }
}

/// The role of a node in the current term.
public enum RaftRole: String, Sendable, Hashable {
    case follower
    case preCandidate
    case candidate
    case leader
}
