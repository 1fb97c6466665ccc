// Ticks, elections (PreVote + RequestVote) and CheckQuorum.

extension RaftNode {
    mutating func tick() {
        if role == .leader {
            tickLeader()
        } else {
            flushDeferredAck()
            electionElapsed += 1
            if isPromotable && electionElapsed >= randomizedElectionTimeout {
                campaign(transfer: false)
            }
        }
    }

    private mutating func tickLeader() {
        flushHeldLearners()
        for peer in progress.keys { progress[peer]!.observeTick(commitIndex: commitIndex) }
        heartbeatElapsed += 1
        electionElapsed += 1
        if electionElapsed >= config.electionTick {
            electionElapsed = 0
            if config.checkQuorum && !quorumRecentlyActive() {
                // CheckQuorum: we may be partitioned away; let the majority elect someone else.
                becomeFollower(term: term, leader: nil)
                return
            }
            // A transfer that did not finish within an election timeout is abandoned.
            leadTransferee = nil
        }
        if heartbeatElapsed >= config.heartbeatTick {
            heartbeatElapsed = 0
            broadcastHeartbeat()
        }
    }

    /// Counts voters heard from since the previous check (self included) and resets the flags.
    private mutating func quorumRecentlyActive() -> Bool {
        var active = 0
        for v in membership.voters {
            if v == id || progress[v]?.recentActive == true { active += 1 }
        }
        for k in progress.keys { progress[k]!.recentActive = false }
        return active >= membership.quorum
    }

    /// Leader lease: while we recently heard from a live leader, disruptive vote requests are ignored.
    var inLease: Bool {
        config.checkQuorum && leaderID != nil && electionElapsed < config.electionTick
    }

    /// Starts a pre-vote, or (transfer or PreVote disabled) a real election right away.
    mutating func campaign(transfer: Bool) {
        assert(isPromotable)
        if config.preVote && !transfer {
            role = .preCandidate
            leaderID = nil
            votes = [:]
            progress = [:]
            resetElectionTimer()
            requestVotes(preVote: true, transfer: false)
        } else {
            startElection(transfer: transfer)
        }
    }

    /// Becomes a candidate in a new term. `transfer` marks a TimeoutNow-triggered election,
    /// whose vote requests bypass the voters' leader lease.
    mutating func startElection(transfer: Bool) {
        if role == .leader { abandonLeaderReads() }
        term += 1
        votedFor = id
        role = .candidate
        leaderID = nil
        votes = [:]
        progress = [:]
        leadTransferee = nil
        resetElectionTimer()
        requestVotes(preVote: false, transfer: transfer)
    }

    private mutating func requestVotes(preVote: Bool, transfer: Bool) {
        // Our own vote first; a single-voter cluster wins immediately.
        if recordVote(from: id, granted: true) { return }
        for peer in membership.voters where peer != id {
            if preVote {
                send(peer, .preVote(lastIndex: log.lastIndex, lastTerm: log.lastTerm), term: term + 1)
            } else {
                send(peer, .requestVote(lastIndex: log.lastIndex, lastTerm: log.lastTerm, leadershipTransfer: transfer))
            }
        }
    }

    /// Records a (pre-)vote and reacts to a decided outcome. Returns true if the campaign ended.
    @discardableResult
    mutating func recordVote(from voter: NodeID, granted: Bool) -> Bool {
        guard membership.contains(voter), votes[voter] == nil else { return false }
        votes[voter] = granted
        let yes = votes.values.filter { $0 }.count
        let no = votes.count - yes
        if yes >= membership.quorum {
            if role == .preCandidate {
                startElection(transfer: false)
            } else {
                becomeLeader()
            }
            return true
        }
        if no >= membership.quorum {
            becomeFollower(term: term, leader: nil)
            return true
        }
        return false
    }

    mutating func handlePreVote(_ m: Message, lastIndex: UInt64, lastTerm: UInt64) {
        // Grant iff the candidate's future term is ahead of ours and its log is up to date;
        // nobody changes term or vote (so a rejoining partitioned node cannot disrupt anyone).
        let grant = m.term > term && log.isUpToDate(lastIndex: lastIndex, lastTerm: lastTerm)
        send(m.from, .preVoteResponse(granted: grant), term: grant ? m.term : term)
    }

    mutating func handleRequestVote(_ m: Message, lastIndex: UInt64, lastTerm: UInt64) {
        assert(m.term == term, "higher terms were adopted before dispatch")
        let canVote = votedFor == m.from || (votedFor == nil && leaderID == nil)
        let grant = canVote && log.isUpToDate(lastIndex: lastIndex, lastTerm: lastTerm)
        if grant {
            votedFor = m.from
            resetElectionTimer()
        }
        send(m.from, .requestVoteResponse(granted: grant))
    }
}
