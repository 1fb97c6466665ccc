// Linearizable reads via ReadIndex (thesis 6.4).
//
// Leader: once an entry of its term is committed, record readIndex = commitIndex (or the durable
// index announced to followers, if higher: see `inferCommit`), start a
// heartbeat round numbered `readRound`; when a quorum echoes a round >= the read's round the
// leader knows it was still leader when the read arrived. The read is released once
// appliedIndex >= readIndex. Followers forward the request to the leader and wait for their own
// applied index to reach the returned read index.

enum ReadOrigin: Sendable, Hashable {
    case local(UInt64)
    case remote(NodeID, UInt64)
}

struct PendingRead: Sendable, Hashable {
    var origin: ReadOrigin
    var index: UInt64
    var round: UInt64
}

extension RaftNode {
    mutating func requestRead(id readID: UInt64) {
        switch role {
        case .leader:
            handleReadRequest(origin: .local(readID))
        case .follower where leaderID != nil:
            send(leaderID!, .readIndexRequest(id: readID))
        default:
            out.other.append(.readFailed(id: readID))
        }
    }

    mutating func handleReadRequest(origin: ReadOrigin) {
        assert(role == .leader)
        // Until an entry of our term commits we may not know the latest commit index (thesis 6.4 step 1).
        guard log.term(at: commitIndex) == term else {
            readsAwaitingLeaderCommit.append(origin)
            return
        }
        startReadRound([origin])
    }

    private mutating func startReadRound(_ origins: [ReadOrigin]) {
        readRound += 1
        // A follower may have applied — and shown — entries we announced durable before our
        // commit index covers them (`inferCommit`): a read must wait for those too.
        let index = max(commitIndex, announcedDurable)
        for o in origins { pendingReads.append(PendingRead(origin: o, index: index, round: readRound)) }
        if membership.quorum == 1 && membership.contains(id) {
            confirmReads()
        } else {
            broadcastHeartbeat()
        }
    }

    /// Releases reads whose round was acknowledged by a quorum (rounds are increasing, so a prefix).
    mutating func confirmReads() {
        guard !pendingReads.isEmpty else { return }
        var confirmedCount = 0
        for read in pendingReads {
            var acks = 0
            for v in membership.voters where v == id || (progress[v]?.readAck ?? 0) >= read.round { acks += 1 }
            guard acks >= membership.quorum else { break }
            confirmedCount += 1
            switch read.origin {
            case .local(let rid): readsAwaitingApply.append((rid, read.index))
            case .remote(let node, let rid): send(node, .readIndexResponse(id: rid, index: read.index))
            }
        }
        pendingReads.removeFirst(confirmedCount)
    }

    /// Called when the leader's commit index advanced.
    mutating func leaderCommitAdvanced() {
        if !readsAwaitingLeaderCommit.isEmpty && log.term(at: commitIndex) == term {
            let waiting = readsAwaitingLeaderCommit
            readsAwaitingLeaderCommit = []
            startReadRound(waiting)
        }
        // A leader removed from the configuration steps down once the removal commits.
        if !membership.contains(id) && commitIndex >= configIndex {
            becomeFollower(term: term, leader: nil)
        }
    }

    /// On losing leadership, reads not yet confirmed fail (the client retries elsewhere).
    mutating func abandonLeaderReads() {
        for origin in readsAwaitingLeaderCommit + pendingReads.map(\.origin) {
            switch origin {
            case .local(let rid): out.other.append(.readFailed(id: rid))
            case .remote(let node, let rid): send(node, .readIndexResponse(id: rid, index: nil))
            }
        }
        readsAwaitingLeaderCommit = []
        pendingReads = []
    }
}
