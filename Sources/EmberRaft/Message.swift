// Messages exchanged between Raft peers. The host transports them; any transport that may
// lose, delay, duplicate or reorder messages is fine (Raft tolerates all of these).

/// A message from one node to another. `term` is the sender's current term, except for
/// pre-votes, which carry the term the sender *would* use if it became a candidate.
public struct Message: Sendable, Hashable {
    public var from: NodeID
    public var to: NodeID
    public var term: UInt64
    public var payload: Payload

    public init(from: NodeID, to: NodeID, term: UInt64, payload: Payload) {
        self.from = from
        self.to = to
        self.term = term
        self.payload = payload
    }

    public enum Payload: Sendable, Hashable {
        /// PreVote request (thesis 9.6): "would you vote for me at `term`?" without anyone changing terms.
        case preVote(lastIndex: UInt64, lastTerm: UInt64)
        case preVoteResponse(granted: Bool)
        /// RequestVote. `leadershipTransfer` lets the request bypass the leader-lease check.
        case requestVote(lastIndex: UInt64, lastTerm: UInt64, leadershipTransfer: Bool)
        case requestVoteResponse(granted: Bool)
        case appendEntries(AppendEntries)
        case appendEntriesResponse(AppendEntriesResponse)
        /// Heartbeat: asserts leadership, carries a safe commit index and the leader's
        /// latest ReadIndex round number (`readContext`), echoed back by the follower.
        case heartbeat(commit: UInt64, readContext: UInt64)
        case heartbeatResponse(readContext: UInt64)
        case installSnapshot(SnapshotChunk)
        case installSnapshotResponse(snapshotIndex: UInt64, receivedBytes: Int, done: Bool)
        /// Leadership transfer: the recipient should start an election immediately.
        case timeoutNow
        /// A follower forwarding a ReadIndex request to the leader.
        case readIndexRequest(id: UInt64)
        /// Leader's answer: the read index, or nil if it could not serve the read.
        case readIndexResponse(id: UInt64, index: UInt64?)
        /// The leader's log is durable on its disk through `index` (sent in three-voter
        /// clusters to followers that have not yet acknowledged that far): with its own copy
        /// durable, a follower then holds a majority's proof and commits without waiting for the
        /// leader's commit index (`RaftNode.inferCommit`). Losing it only costs that wait.
        case leaderDurable(index: UInt64)
    }
}

public struct AppendEntries: Sendable, Hashable {
    public var prevIndex: UInt64
    public var prevTerm: UInt64
    public var entries: [LogEntry]
    public var commit: UInt64

    public init(prevIndex: UInt64, prevTerm: UInt64, entries: [LogEntry], commit: UInt64) {
        self.prevIndex = prevIndex
        self.prevTerm = prevTerm
        self.entries = entries
        self.commit = commit
    }
}

public struct AppendEntriesResponse: Sendable, Hashable {
    public var success: Bool
    /// On success: the highest index known to match the leader. On rejection: the `prevIndex` rejected.
    public var index: UInt64
    /// Conflict hints on rejection (thesis 5.3 optimization): the follower's term at `prevIndex`
    /// (0 if its log is shorter) and the first index it holds with that term (or its lastIndex + 1).
    public var conflictTerm: UInt64
    public var conflictIndex: UInt64

    public init(success: Bool, index: UInt64, conflictTerm: UInt64 = 0, conflictIndex: UInt64 = 0) {
        self.success = success
        self.index = index
        self.conflictTerm = conflictTerm
        self.conflictIndex = conflictIndex
    }
}

/// One piece of a snapshot. A few chunks are in flight per follower
/// (`RaftConfig.maxInflightSnapshotChunks`); the follower acknowledges how many bytes it holds
/// in order so the leader can resume (or restart) the transfer.
public struct SnapshotChunk: Sendable, Hashable {
    public var metadata: SnapshotMetadata
    public var offset: Int
    public var totalSize: Int
    public var data: [UInt8]
    public var done: Bool

    public init(metadata: SnapshotMetadata, offset: Int, totalSize: Int, data: [UInt8], done: Bool) {
        self.metadata = metadata
        self.offset = offset
        self.totalSize = totalSize
        self.data = data
        self.done = done
    }
}

/// What `Action.sendSnapshotChunk` asks the host to read and send.
public struct SnapshotChunkRequest: Sendable, Hashable {
    public var from: NodeID
    public var to: NodeID
    public var term: UInt64
    public var metadata: SnapshotMetadata
    public var offset: Int
    public var length: Int
    public var totalSize: Int

    public init(from: NodeID, to: NodeID, term: UInt64, metadata: SnapshotMetadata, offset: Int, length: Int, totalSize: Int) {
        self.from = from
        self.to = to
        self.term = term
        self.metadata = metadata
        self.offset = offset
        self.length = length
        self.totalSize = totalSize
    }

    /// The InstallSnapshot message carrying `data` (the `length` bytes at `offset`).
    public func message(data: [UInt8]) -> Message {
        precondition(data.count == length, "snapshot chunk of the wrong length")
        let chunk = SnapshotChunk(metadata: metadata, offset: offset, totalSize: totalSize, data: data,
                                  done: offset + length == totalSize)
        return Message(from: from, to: to, term: term, payload: .installSnapshot(chunk))
    }
}
