// The leader's view of one follower's replication progress (etcd-style flow control).

public enum ReplicationState: String, Sendable, Hashable {
    /// Unknown match point: send one AppendEntries at a time and back off on rejection.
    case probe
    /// Known match point: pipeline AppendEntries up to the in-flight window.
    case replicate
    /// Follower is behind the retained log: stream the snapshot in chunks.
    case snapshot
}

/// Leader-side bookkeeping per peer. Exposed read-only through `RaftStatus`.
public struct PeerProgress: Sendable, Hashable {
    public internal(set) var matchIndex: UInt64
    public internal(set) var nextIndex: UInt64
    public internal(set) var state: ReplicationState
    /// Heard from this peer since the last check-quorum round.
    public internal(set) var recentActive: Bool = false

    /// Leader ticks for which this follower has been behind the commit index without its match
    /// index advancing: a follower that is stuck (not merely slow) shows a count that keeps
    /// growing. Hosts export it (times their tick period) so operators see a stuck follower.
    public internal(set) var lagStalledTicks = 0
    /// matchIndex at the previous leader tick (to tell whether it advanced since).
    var matchAtLastTick: UInt64 = 0

    /// Probe: an AppendEntries is outstanding; wait for a response or the next heartbeat response.
    var probeSent = false
    /// Replicate: last index of each unacknowledged AppendEntries, oldest first.
    var inflight: [UInt64] = []
    /// matchIndex seen at the previous heartbeat response; no progress between two of them means
    /// the pipeline lost messages and must be restarted from matchIndex.
    var matchAtLastHeartbeat: UInt64 = 0
    /// Snapshot state: index and size of the snapshot being streamed (index 0: waiting for the
    /// host to prepare one), bytes the follower acknowledged, bytes sent so far, and heartbeat
    /// rounds without progress (after which the unacknowledged chunks are resent).
    var snapshotIndex: UInt64 = 0
    var snapshotSize: Int = 0
    var snapshotOffset: Int = 0
    var snapshotSent: Int = 0
    var snapshotStalls: Int = 0
    /// Bytes the follower said it holds in its latest answer (may be below `snapshotOffset` when
    /// it lost part of the transfer, or when answers were reordered).
    var snapshotReported: Int = 0
    /// Highest ReadIndex round this peer has acknowledged.
    var readAck: UInt64 = 0
    /// The configuration entry that made this peer a voter while we lead (0: a voter in every
    /// configuration of our log when we took over). Until it holds that entry the peer answers as
    /// what it was, and a learner may answer before its write is durable (issue 38): only an
    /// acknowledgement of this entry or later counts toward the commit quorum (`quorumMatch`).
    var voterSince: UInt64 = 0

    /// How far this peer counts toward the commit quorum: its match index once it acknowledged
    /// the entry that made it a voter, nothing before.
    var quorumMatch: UInt64 { matchIndex >= voterSince ? matchIndex : 0 }

    init(nextIndex: UInt64) {
        self.matchIndex = 0
        self.nextIndex = nextIndex
        self.state = .probe
    }

    mutating func becomeProbe() {
        state = .probe
        probeSent = false
        inflight.removeAll()
        nextIndex = max(nextIndex, matchIndex + 1)
    }

    mutating func becomeReplicate() {
        state = .replicate
        probeSent = false
        inflight.removeAll()
        nextIndex = matchIndex + 1
    }

    mutating func becomeSnapshot(index: UInt64, size: Int) {
        state = .snapshot
        probeSent = false
        inflight.removeAll()
        snapshotIndex = index
        snapshotSize = size
        snapshotOffset = 0
        snapshotSent = 0
        snapshotStalls = 0
        snapshotReported = 0
    }

    /// Records an acknowledgement up to `index`; returns true if matchIndex advanced.
    mutating func acknowledge(_ index: UInt64) -> Bool {
        inflight.removeAll { $0 <= index }
        guard index > matchIndex else { return false }
        matchIndex = index
        nextIndex = max(nextIndex, index + 1)
        // It advanced, so it is not stalled — at once, not at the next tick: a status taken in
        // between showed no lag with stalled time (the count is only of ticks without advancing).
        lagStalledTicks = 0
        return true
    }

    /// Entries the leader committed that this follower is not known to hold.
    public func lag(commitIndex: UInt64) -> UInt64 { commitIndex > matchIndex ? commitIndex - matchIndex : 0 }

    /// One leader tick: count it as stalled when the follower is behind and did not advance.
    mutating func observeTick(commitIndex: UInt64) {
        lagStalledTicks = lag(commitIndex: commitIndex) == 0 || matchIndex != matchAtLastTick ? 0 : lagStalledTicks + 1
        matchAtLastTick = matchIndex
    }

    func isPaused(maxInflight: Int) -> Bool {
        switch state {
        case .probe: return probeSent
        case .replicate: return inflight.count >= maxInflight
        case .snapshot: return true
        }
    }
}
