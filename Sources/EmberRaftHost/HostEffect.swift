import EmberRaft

/// What a Raft host runtime feeds `HostCore`.
public enum HostInput: Sendable, Hashable {
    /// A Raft event (tick, peer message, proposal, read, `.persisted`, ...): stepped at once; its
    /// actions join the turn, planned at `.endTurn`. Answers proposal outcomes right away.
    case event(Event)
    /// Every input of the turn was fed: plan its effects. `inputWaiting`: more input is already
    /// queued (a follower may then carry its apply into the next turn's write).
    case endTurn(inputWaiting: Bool)
    /// The host's state machine covers `index` (at most Raft's applied index): compact Raft's log
    /// unless an apply is still deferred or a snapshot image is being prepared.
    case compact(index: UInt64)
    /// The image `.prepareSnapshot` asked for is readable (nil: preparing it failed).
    case snapshotPrepared(index: UInt64, size: Int)
    case snapshotPrepareFailed
    /// The runtime no longer holds the image a `.sendSnapshotChunk` named: prepare a new one.
    case snapshotUnavailable
}

/// What `HostCore` asks its runtime to do, IN ORDER: a `.persist` must be durable before any
/// later effect is performed (a runtime awaits it; Action.swift's contract, which the core has
/// already applied: the sends that may precede durability come before it).
public enum HostEffect: Sendable, Hashable {
    case send(Message)
    case persist(HostPersist)
    /// Apply committed entries (in index order, after what the state machine holds).
    /// `metaSync` false: nothing else waits, the apply's commit may skip the meta page's sync.
    case apply([LogEntry], metaSync: Bool)
    /// Write a received snapshot chunk to the staging area (offset 0 starts over).
    case stageSnapshotChunk(SnapshotChunk)
    /// Replace the state machine with the staged snapshot `metadata` (atomically), empty the
    /// stored log, then store `tail`: the entries Raft holds after the snapshot (empty when Raft's
    /// log is already past it: a newer snapshot restored in the same turn installs next).
    case installSnapshot(SnapshotMetadata, tail: [LogEntry])
    /// Raft's state is now the snapshot installed by the preceding `.installSnapshot`.
    case restoredSnapshot(SnapshotMetadata)
    /// Raft compacted its log through this point (the state machine covers it; a store that
    /// trims its own log has nothing to do).
    case compacted(SnapshotMetadata)
    case sendSnapshotChunk(SnapshotChunkRequest)
    /// Prepare a readable image of the state machine and answer `.snapshotPrepared` (at most
    /// one at a time: the core does not ask again before the answer).
    case prepareSnapshot
    case readReady(id: UInt64, index: UInt64)
    case readFailed(id: UInt64)
    /// Outcomes of a proposal, answered by `.event` at once (never part of a turn's plan).
    case proposalAccepted(index: UInt64, term: UInt64)
    case proposalRejected(ProposalRejection)
}

/// One durable write: term and vote first (a log never holds entries of a term the node could
/// forget it saw), then `entries` (replacing stored entries from the first one's index on),
/// then the committed `apply` entries, in one transaction with the append where the store can.
public struct HostPersist: Sendable, Hashable {
    /// Term and vote, only when they changed (the commit index is volatile).
    public var hardState: HardState?
    public var entries: [LogEntry]
    public var apply: [LogEntry]

    public init(hardState: HardState? = nil, entries: [LogEntry] = [], apply: [LogEntry] = []) {
        self.hardState = hardState
        self.entries = entries
        self.apply = apply
    }

    /// The last entry this write makes durable: step `.persisted(through:term:)` with it once
    /// the write is durable (HOST CONTRACT 2b).
    public var report: (index: UInt64, term: UInt64)? {
        entries.last.map { ($0.index, $0.term) }
    }
}

extension Message.Payload {
    /// A leader replicating: may be sent before the turn's persists are durable (Action.swift).
    public var isReplication: Bool {
        switch self {
        case .appendEntries, .heartbeat: return true
        default: return false
        }
    }

    /// May go out before the persists that precede it are durable (Action.swift contract 2): a
    /// leader replicating, and a follower's heartbeat answer, which claims nothing it stored (it
    /// echoes a read round; a term it learned and may forget in a crash carries no vote), so a
    /// follower whose write waits behind a long apply still answers its leader's heartbeats.
    /// Append and vote answers speak for what was written: they wait.
    public var mayPrecedeDurability: Bool {
        switch self {
        case .appendEntries, .heartbeat, .heartbeatResponse: return true
        default: return false
        }
    }
}

extension Array where Element == HostEffect {
    /// The (index, term) of each command a `proposeBatch` step appended, in order.
    public var acceptedProposals: [(UInt64, UInt64)] {
        var out: [(UInt64, UInt64)] = []
        for case .proposalAccepted(let index, let term) in self { out.append((index, term)) }
        return out
    }

    /// The leader a refused proposal named.
    public var rejectionHint: NodeID? {
        for case .proposalRejected(.notLeader(let hint)) in self { return hint }
        return nil
    }
}
