// Message intake: term handling common to all messages (paper Figure 2 "all servers"), then dispatch.

extension RaftNode {
    mutating func receive(_ m: Message) {
        if m.term > term {
            switch m.payload {
            case .preVote, .requestVote(_, _, false):
                // Leader lease (thesis 4.2.3): while we hear from a leader, ignore would-be
                // disruptors such as a removed server or a node returning from a partition.
                if inLease { return }
            default:
                break
            }
            switch m.payload {
            case .preVote:
                break  // pre-votes never change our term
            case .preVoteResponse(granted: true):
                break  // granted pre-votes carry our *future* term
            case .appendEntries, .heartbeat, .installSnapshot, .leaderDurable:
                becomeFollower(term: m.term, leader: m.from)
            default:
                becomeFollower(term: m.term, leader: nil)
            }
        } else if m.term < term {
            switch m.payload {
            case .appendEntries, .heartbeat, .installSnapshot:
                // A stale leader (e.g. healed from a partition) must learn the newer term; with
                // PreVote/CheckQuorum nothing else would ever tell it.
                send(m.from, .appendEntriesResponse(AppendEntriesResponse(success: false, index: 0)))
            case .preVote:
                send(m.from, .preVoteResponse(granted: false))
            default:
                break  // stale: drop
            }
            return
        }

        switch m.payload {
        case .preVote(let lastIndex, let lastTerm):
            handlePreVote(m, lastIndex: lastIndex, lastTerm: lastTerm)
        case .preVoteResponse(let granted):
            // A grant must be for the term we are pre-campaigning for (term + 1), not a late
            // answer to an earlier round.
            if role == .preCandidate && (!granted || m.term == term + 1) { recordVote(from: m.from, granted: granted) }
        case .requestVote(let lastIndex, let lastTerm, _):
            handleRequestVote(m, lastIndex: lastIndex, lastTerm: lastTerm)
        case .requestVoteResponse(let granted):
            if role == .candidate { recordVote(from: m.from, granted: granted) }
        case .appendEntries(let a):
            acceptLeader(m.from)
            handleAppendEntries(from: m.from, a)
        case .appendEntriesResponse(let r):
            if role == .leader { handleAppendResponse(from: m.from, r) }
        case .heartbeat(let commit, let context):
            acceptLeader(m.from)
            // The leader sends min(matchIndex, commit), so these entries match its log.
            commitIndex = max(commitIndex, min(commit, log.lastIndex))
            flushDeferredAck()
            send(m.from, .heartbeatResponse(readContext: context))
            if commit > log.lastIndex {
                // The leader claims entries we acknowledged but no longer hold: our log was lost
                // (data dir wiped). Say so as a rejection of `commit` with our real end, so the
                // leader re-replicates at once even when no write is coming to trigger it.
                send(m.from, .appendEntriesResponse(AppendEntriesResponse(
                    success: false, index: commit, conflictTerm: 0, conflictIndex: log.lastIndex + 1)))
            }
        case .heartbeatResponse(let context):
            if role == .leader { handleHeartbeatResponse(from: m.from, readContext: context) }
        case .installSnapshot(let chunk):
            acceptLeader(m.from)
            handleSnapshotChunk(from: m.from, chunk)
        case .installSnapshotResponse(let index, let received, let done):
            if role == .leader { handleSnapshotResponse(from: m.from, snapshotIndex: index, received: received, done: done) }
        case .timeoutNow:
            // Leadership transfer: campaign at once, skipping PreVote and the lease.
            if role == .follower && isPromotable { startElection(transfer: true) }
        case .readIndexRequest(let readID):
            if role == .leader {
                handleReadRequest(origin: .remote(m.from, readID))
            } else {
                send(m.from, .readIndexResponse(id: readID, index: nil))
            }
        case .leaderDurable(let index):
            acceptLeader(m.from)
            leaderDurable = leaderDurable.term == term ? (term, max(leaderDurable.index, index)) : (term, index)
            inferCommit()
        case .readIndexResponse(let readID, let index):
            if let index {
                readsAwaitingApply.append((readID, index))
            } else {
                out.other.append(.readFailed(id: readID))
            }
        }
    }

    /// A message from the leader of our current term.
    private mutating func acceptLeader(_ leader: NodeID) {
        assert(role != .leader || leader == id, "two leaders in one term")
        if role != .follower {
            becomeFollower(term: term, leader: leader)
        }
        leaderID = leader
        electionElapsed = 0
    }
}
