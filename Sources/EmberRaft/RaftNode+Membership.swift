// Proposals, single-server membership changes and leadership transfer.

extension RaftNode {
    /// `Event.propose` (a batch of one) and `Event.proposeBatch`: all of `batch` or none of it.
    /// One broadcast for the whole batch: a
    /// proposal at a time would send each follower an AppendEntries per command (and get an
    /// answer to each), which under load was most of a leader's Raft work.
    mutating func propose(batch: [[UInt8]]) {
        precondition(!batch.isEmpty, "an empty proposal batch")
        let refusal: ProposalRejection? =
            role != .leader ? .notLeader(leaderHint: leaderID) : leadTransferee != nil ? .transferInProgress : nil
        if let refusal {
            for _ in batch { out.other.append(.proposalRejected(refusal)) }
            return
        }
        for entry in appendAsLeader(kind: .normal, batch: batch) {
            out.other.append(.proposalAccepted(index: entry.index, term: entry.term))
        }
        if role == .leader { broadcastAppend() }
    }

    /// Single-server change (thesis 4.1): takes effect as soon as it is appended, and only one may
    /// be uncommitted at a time. The leader must also have committed an entry of its own term,
    /// which fixes the known single-server-change bug across leader changes.
    mutating func proposeConfigChange(_ change: ConfigChange, context: [UInt8] = []) {
        guard role == .leader else {
            out.other.append(.proposalRejected(.notLeader(leaderHint: leaderID)))
            return
        }
        guard leadTransferee == nil else {
            out.other.append(.proposalRejected(.transferInProgress))
            return
        }
        guard pendingConfigIndex <= commitIndex, log.term(at: commitIndex) == term else {
            out.other.append(.proposalRejected(.configChangePending))
            return
        }
        guard let next = membership.applying(change), !next.voters.isEmpty else {
            out.other.append(.proposalRejected(.configChangeNoop))
            return
        }
        if next.learners.count > membership.learners.count && next.learners.count > config.maxLearners {
            out.other.append(.proposalRejected(.tooManyLearners(limit: config.maxLearners)))
            return
        }
        if let refusal = promotionRefusal(change) {
            out.other.append(.proposalRejected(refusal))
            return
        }
        let entry = appendAsLeader(kind: .configChange, data: ConfigEntry(membership: next, context: context).encoded())
        pendingConfigIndex = entry.index
        out.other.append(.proposalAccepted(index: entry.index, term: entry.term))
        if role == .leader { broadcastAppend() }
    }

    /// Promoting a learner (`promoteLearner`, or `addVoter` naming one) that is further behind
    /// than `maxPromotionLag`: it would count toward the commit quorum at once, so with one more
    /// voter down commits would wait for it to catch up. nil when allowed.
    func promotionRefusal(_ change: ConfigChange) -> ProposalRejection? {
        let target: NodeID
        switch change {
        case .promoteLearner(let id): target = id
        case .addVoter(let id) where membership.isLearner(id): target = id
        default: return nil
        }
        let match = progress[target]?.matchIndex ?? 0
        let lag = log.lastIndex > match ? log.lastIndex - match : 0
        return lag > config.maxPromotionLag ? .learnerBehind(target, lag: lag, limit: config.maxPromotionLag) : nil
    }

    /// Recomputes the membership from the log after config entries were appended or truncated.
    mutating func refreshMembership() {
        let previous = membership
        configIndex = log.lastConfigIndex(atOrBefore: log.lastIndex)
        membership = log.membership(at: log.lastIndex)
        guard role == .leader else { return }
        for v in membership.members where v != id && progress[v] == nil {
            progress[v] = PeerProgress(nextIndex: log.lastIndex + 1)
        }
        // A member made a voter by this entry (a learner promoted, a node added) counts toward
        // the commit quorum only once it acknowledges the entry: before, it answers as a learner,
        // which may answer before its write is durable (issue 38). The entries between our
        // commit index and this one it is sent meanwhile then commit on the other voters' copies,
        // or on its own once it holds its promotion. (A new leader needs no such mark: every
        // configuration in its log precedes the entries of its term, the only ones it counts.)
        for v in membership.voters where v != id && !previous.contains(v) {
            progress[v]?.voterSince = configIndex
        }
        // A removed follower keeps being replicated to until its removal commits, so it learns
        // it was removed (and stops campaigning) instead of timing out into elections.
        if commitIndex >= configIndex { pruneDeparted() }
        if let t = leadTransferee, !membership.contains(t) { leadTransferee = nil }
    }

    /// `Event.removedFromCluster`: stop campaigning (and leading) until our log holds a
    /// configuration at least as new as the one we were told of.
    mutating func learnRemoval(configIndex index: UInt64) {
        guard index > configIndex, index > removedAtConfigIndex else { return }
        removedAtConfigIndex = index
        if role != .follower { becomeFollower(term: term, leader: nil) }
    }

    /// Drops progress of peers that are no longer members (their removal has committed).
    mutating func pruneDeparted() {
        for k in progress.keys.sorted() where !membership.isMember(k) {
            progress[k] = nil
        }
    }

    /// Removed peers the leader still replicates to (their removal has not committed yet).
    public var departingPeers: [NodeID] {
        progress.keys.filter { !membership.isMember($0) }.sorted()
    }

    /// Peers the leader sends to: voters and learners, plus removed peers until their removal
    /// commits. Sorted (replays stay deterministic); built without sets, as it runs on every broadcast.
    var replicationTargets: [NodeID] {
        var out = progress.keys.filter { $0 != id }
        for v in membership.members where v != id && progress[v] == nil { out.append(v) }
        out.sort()
        return out
    }

    /// Leadership transfer (thesis 3.10): bring the target up to date, then send TimeoutNow.
    /// New proposals are refused meanwhile; abandoned after one election timeout.
    mutating func transferLeadership(to target: NodeID) {
        guard role == .leader, target != id, membership.contains(target), let pr = progress[target] else { return }
        if leadTransferee == target { return }
        leadTransferee = target
        electionElapsed = 0
        if pr.matchIndex == log.lastIndex {
            send(target, .timeoutNow)
        } else {
            replicate(to: target, sendIfEmpty: true)
        }
    }
}
