// Log replication: leader-side AppendEntries pipelining and follower-side log matching.

extension RaftNode {
    // MARK: Leader

    /// Appends a new entry to the leader's log; it counts for the leader once `.persisted` says so.
    @discardableResult
    mutating func appendAsLeader(kind: EntryKind, data: [UInt8]) -> LogEntry {
        appendAsLeader(kind: kind, batch: [data])[0]
    }

    /// Appends an entry of `kind` for each of `batch`, in order: one log append, one persist
    /// action, one commit check.
    mutating func appendAsLeader(kind: EntryKind, batch: [[UInt8]]) -> [LogEntry] {
        assert(role == .leader && !batch.isEmpty)
        let first = log.lastIndex + 1
        var entries: [LogEntry] = []
        entries.reserveCapacity(batch.count)
        for (k, data) in batch.enumerated() {
            entries.append(LogEntry(index: first + UInt64(k), term: term, kind: kind, data: data))
        }
        log.truncateAndAppend(entries)
        // Nothing from here on is durable yet (the log may have been shortened by a snapshot).
        durableIndex = min(durableIndex, first - 1)
        out.persists.append(.persistEntries(entries))
        if kind == .configChange { refreshMembership() }
        // A single-voter cluster commits once this is durable (`.persisted`); nothing here then.
        maybeCommit()
        return entries
    }

    /// Sends whatever each follower is missing (and the current commit index).
    mutating func broadcastAppend() {
        for peer in replicationTargets {
            // A learner sent every committed entry already knows the commit index (each
            // AppendEntries carries it): a proposal has nothing for it (`replicationEnd`).
            let idle = membership.isLearner(peer) && progress[peer].map { $0.state == .replicate && $0.nextIndex == commitIndex + 1 } == true
            replicate(to: peer, sendIfEmpty: !idle)
        }
    }

    /// The last entry the leader sends `peer`: the end of its log, or for a learner the commit
    /// index. A learner never counts toward a quorum, so an uncommitted entry is of no use to it
    /// before it commits, and one sent with its commit is appended and applied in one write (no
    /// second message carrying the commit index, no write of an unapplied tail): the learner's
    /// events come no later than the commit index would have reached it. A promoted learner is
    /// a voter from the moment the leader appends its promotion, and is sent the whole log.
    func replicationEnd(of peer: NodeID) -> UInt64 {
        membership.isLearner(peer) ? min(commitIndex, log.lastIndex) : log.lastIndex
    }

    /// The flow-control window of `peer`: unacknowledged AppendEntries, and entries in one.
    /// A learner's is narrow and deep (`RaftConfig.maxInflightLearnerMessages`), wider while
    /// few of the entries sent it are unacknowledged (`learnerSmallAppendsMaxEntries`): each
    /// commit then goes at once although the learner answers several appends together
    /// (`learnerAckMinEntries`). Each append in flight carries an entry at least, so that many
    /// more messages bound it. It depends on what is in flight: asked again before each send.
    func window(of peer: NodeID) -> (inflight: Int, entries: Int) {
        guard membership.isLearner(peer) else { return (config.maxInflightMessages, config.maxEntriesPerMessage) }
        var inflight = config.maxInflightLearnerMessages
        if let pr = progress[peer], pr.state == .replicate, !pr.inflight.isEmpty,
           pr.nextIndex - 1 - min(pr.matchIndex, pr.nextIndex - 1) <= UInt64(config.learnerSmallAppendsMaxEntries) {
            inflight += config.learnerSmallAppendsMaxEntries
        }
        return (inflight, config.maxEntriesPerLearnerMessage)
    }

    /// Sends AppendEntries to `peer` until its flow-control window is full or it is up to date.
    mutating func replicate(to peer: NodeID, sendIfEmpty: Bool) {
        var first = true
        while let pr = progress[peer], !pr.isPaused(maxInflight: window(of: peer).inflight) {
            let sent = sendAppend(to: peer, sendIfEmpty: first && sendIfEmpty)
            first = false
            if !sent || progress[peer]?.state != .replicate { break }
        }
    }

    /// Sends one AppendEntries (or starts a snapshot when the entries were compacted away).
    /// Returns false when nothing was sent.
    @discardableResult
    mutating func sendAppend(to peer: NodeID, sendIfEmpty: Bool) -> Bool {
        let limits = window(of: peer)
        guard var pr = progress[peer], !pr.isPaused(maxInflight: limits.inflight) else { return false }
        let prevIndex = pr.nextIndex - 1
        guard let prevTerm = log.term(at: prevIndex) else {
            sendSnapshot(to: peer)
            return true
        }
        let end = replicationEnd(of: peer)
        if holdsForBatch(peer, pr, end: end) { return false }
        let entries = log.entries(
            from: pr.nextIndex, maxCount: limits.entries, maxBytes: config.maxBytesPerMessage, through: end)
        assert(entries.last.map { $0.index <= end } ?? true, "entries past the peer's replication end")
        if entries.isEmpty && !sendIfEmpty && pr.state == .replicate { return false }
        if !entries.isEmpty { learnersHeld.remove(peer) }
        switch pr.state {
        case .probe:
            pr.probeSent = true
        case .replicate:
            if let last = entries.last {
                pr.nextIndex = last.index + 1
                pr.inflight.append(last.index)
            }
        case .snapshot:
            assertionFailure("paused")
        }
        progress[peer] = pr
        send(peer, .appendEntries(AppendEntries(prevIndex: prevIndex, prevTerm: prevTerm, entries: entries, commit: commitIndex)))
        return true
    }

    mutating func handleAppendResponse(from peer: NodeID, _ r: AppendEntriesResponse) {
        guard var pr = progress[peer] else { return }
        pr.recentActive = true
        if r.success {
            let advanced = pr.acknowledge(r.index)
            if advanced && pr.state == .probe { pr.becomeReplicate() }
            // A late append ack can show the follower already has what the snapshot covers.
            if pr.state == .snapshot && pr.matchIndex >= max(pr.snapshotIndex, log.snapshotIndex) {
                pr.nextIndex = pr.matchIndex + 1
                pr.becomeProbe()
            }
            progress[peer] = pr
            if advanced {
                if maybeCommit() { broadcastAppend() }
                if leadTransferee == peer && pr.matchIndex == log.lastIndex { send(peer, .timeoutNow) }
            }
            if role == .leader { replicate(to: peer, sendIfEmpty: false) }
            return
        }
        // Rejection. Ignore stale ones: they answer a prevIndex we no longer probe (one below
        // matchIndex was sent before the follower acknowledged more).
        switch pr.state {
        case .replicate where r.index < pr.matchIndex, .snapshot:
            progress[peer] = pr
            return
        case .probe where r.index != pr.nextIndex - 1:
            progress[peer] = pr
            return
        default:
            break
        }
        if followerLostLog(r, matchIndex: pr.matchIndex) {
            // A current rejection says the follower no longer holds entries it acknowledged: its
            // data dir was wiped (or restored from an old backup). A voter losing its log is
            // outside Raft's fault model, but re-replicating to it is the recovery operators
            // expect; keeping matchIndex would floor nextIndex above its log forever (and it
            // would only return once compaction forced a snapshot). Lowering matchIndex is safe:
            // it only makes future commit counting (and the commit heartbeats claim) more
            // conservative; commitIndex never decreases. A late rejection of prevIndex ==
            // matchIndex reordered after its ack lands here too: harmless, the next probe's
            // success raises matchIndex again.
            pr.matchIndex = min(pr.matchIndex, r.conflictIndex > 0 ? r.conflictIndex - 1 : 0)
            pr.matchAtLastHeartbeat = min(pr.matchAtLastHeartbeat, pr.matchIndex)
        }
        // Conflict back-off using the follower's hints (thesis 5.3): skip a whole term at a time.
        var next = r.conflictIndex
        if r.conflictTerm > 0 {
            let i = log.lastIndex(withTermAtMost: r.conflictTerm, from: r.index)
            if log.term(at: i) == r.conflictTerm { next = i + 1 }
        }
        pr.nextIndex = max(pr.matchIndex + 1, min(next, r.index))
        pr.becomeProbe()
        progress[peer] = pr
        sendAppend(to: peer, sendIfEmpty: true)
    }

    /// True when a rejection that is not stale (its prevIndex >= matchIndex) shows the follower
    /// lacks a matching entry at or below matchIndex: it rejected matchIndex itself, or its hint
    /// (log shorter than prevIndex: conflictTerm 0, conflictIndex = its lastIndex + 1) puts the
    /// end of its log below matchIndex.
    func followerLostLog(_ r: AppendEntriesResponse, matchIndex: UInt64) -> Bool {
        guard !r.success, r.index >= matchIndex, matchIndex > 0 else { return false }
        return r.index == matchIndex || (r.conflictTerm == 0 && r.conflictIndex <= matchIndex)
    }

    mutating func handleHeartbeatResponse(from peer: NodeID, readContext: UInt64) {
        guard var pr = progress[peer] else { return }
        pr.recentActive = true
        pr.readAck = max(pr.readAck, readContext)
        switch pr.state {
        case .probe:
            pr.probeSent = false  // the probe may have been lost: allow a retry
        case .replicate:
            // No acknowledged progress over a whole heartbeat round while behind: assume the
            // pipeline lost messages and restart it from the known match point.
            if pr.matchIndex < replicationEnd(of: peer) && pr.matchIndex == pr.matchAtLastHeartbeat {
                pr.nextIndex = pr.matchIndex + 1
                pr.becomeProbe()
            }
        case .snapshot:
            break
        }
        pr.matchAtLastHeartbeat = pr.matchIndex
        let state = pr.state
        progress[peer] = pr
        confirmReads()
        if state == .snapshot {
            snapshotHeartbeat(to: peer)  // resend in case a chunk or its ack was lost
        } else if pr.matchIndex < replicationEnd(of: peer) {
            replicate(to: peer, sendIfEmpty: false)
        }
    }

    mutating func broadcastHeartbeat() {
        for peer in replicationTargets {
            // Only claim commits the follower's log is known to contain.
            let commit = min(progress[peer]?.matchIndex ?? 0, commitIndex)
            send(peer, .heartbeat(commit: commit, readContext: readRound))
        }
    }

    /// Advances the commit index to the highest index replicated on a majority, but only if that
    /// entry is from the current term (paper 5.4.2, Figure 8). Returns true if it advanced.
    @discardableResult
    mutating func maybeCommit() -> Bool {
        guard role == .leader, !membership.voters.isEmpty else { return false }
        var matches: [UInt64] = []
        for v in membership.voters {
            // Our own log counts only as far as it is durable (it may be sent before it is written);
            // a promoted learner's only from its acknowledgement of its promotion (`voterSince`).
            matches.append(v == id ? min(log.lastIndex, durableIndex) : (progress[v]?.quorumMatch ?? 0))
        }
        matches.sort(by: >)
        assert(matches.count == membership.voters.count)
        let candidate = matches[membership.quorum - 1]
        guard candidate > commitIndex, log.term(at: candidate) == term else { return false }
        commitIndex = candidate
        if commitIndex >= configIndex { pruneDeparted() }
        leaderCommitAdvanced()
        return true
    }

    /// `Event.persisted`: the host made our log durable through `index`.
    mutating func persisted(through index: UInt64, term entryTerm: UInt64) {
        guard index > durableIndex, log.term(at: index) == entryTerm else { return }
        durableIndex = index
        if role == .leader {
            if maybeCommit() { broadcastAppend() }
            announceDurable()
        } else {
            inferCommit()
        }
    }

    /// Whether a follower may count the leader's durable log and its own as a majority: exactly
    /// three voters, both of them among them, and no configuration change waiting to commit in
    /// our log (single-server changes keep every old and new majority overlapping, so a pair
    /// that is a majority now stays one for what it has stored).
    var twoOfThreeCommit: Bool {
        guard let leader = leaderID, membership.voters.count == 3 else { return false }
        return membership.voters.contains(id) && membership.voters.contains(leader) && configIndex <= commitIndex
    }

    /// Leader, three voters: tells the followers that have not acknowledged our durable end
    /// that it is durable here, so each can commit it once its own copy is (`inferCommit`)
    /// instead of waiting for an acknowledgement round and our commit index.
    mutating func announceDurable() {
        guard membership.voters.count == 3, membership.voters.contains(id), durableIndex > announcedDurable else { return }
        let through = min(durableIndex, log.lastIndex)
        guard log.term(at: through) == term else { return }  // only current-term entries commit by counting
        announcedDurable = through
        for peer in replicationTargets where membership.voters.contains(peer) && (progress[peer]?.matchIndex ?? 0) < through {
            send(peer, .leaderDurable(index: through))
        }
    }

    /// Follower: an entry of the current term that is durable both here and (by `.leaderDurable`)
    /// at the leader is on two of three voters — committed (paper 5.4: any later leader needs a
    /// vote from one of the two, who refuse a log without it). Entries of this term came from
    /// this leader, so ours match its log through them; earlier entries commit with them.
    mutating func inferCommit() {
        guard role == .follower, leaderDurable.term == term, twoOfThreeCommit else { return }
        let k = min(leaderDurable.index, durableIndex, log.lastIndex)
        guard k > commitIndex, log.term(at: k) == term else { return }
        commitIndex = k
        inferredCommits += 1
    }

    // MARK: Follower

    mutating func handleAppendEntries(from leader: NodeID, _ a: AppendEntries) {
        var prevIndex = a.prevIndex
        var prevTerm = a.prevTerm
        var entries = a.entries
        if prevIndex < commitIndex {
            // Our committed prefix already matches the leader's; skip it.
            let skip = Int(min(UInt64(entries.count), commitIndex - prevIndex))
            for e in entries.prefix(skip) where log.term(at: e.index) != nil {
                assert(log.term(at: e.index) == e.term, "leader sent a conflicting committed entry")
            }
            entries.removeFirst(skip)
            prevIndex = commitIndex
            prevTerm = log.term(at: commitIndex) ?? 0
            if entries.isEmpty {
                acknowledgeAppend(to: leader, index: commitIndex, entries: 0)
                return
            }
            assert(entries[0].index == prevIndex + 1)
        }
        guard log.matches(index: prevIndex, term: prevTerm) else {
            var hint = AppendEntriesResponse(success: false, index: a.prevIndex)
            if let t = log.term(at: prevIndex) {
                hint.conflictTerm = t
                hint.conflictIndex = log.firstIndexOfTerm(at: prevIndex)
            } else {
                hint.conflictIndex = log.lastIndex + 1
            }
            flushDeferredAck()
            send(leader, .appendEntriesResponse(hint))
            return
        }
        // Log matching: keep entries that agree, truncate from the first conflict.
        if let conflict = entries.firstIndex(where: { log.term(at: $0.index) != $0.term }) {
            let newEntries = Array(entries[conflict...])
            assert(newEntries[0].index > commitIndex, "would truncate committed entries")
            let truncatesConfig = newEntries[0].index <= configIndex
            log.truncateAndAppend(newEntries)
            durableIndex = min(durableIndex, newEntries[0].index - 1)
            out.persists.append(.persistEntries(newEntries))
            if truncatesConfig || newEntries.contains(where: { $0.kind == .configChange }) { refreshMembership() }
        }
        let lastNew = prevIndex + UInt64(entries.count)
        commitIndex = max(commitIndex, min(a.commit, lastNew))
        acknowledgeAppend(to: leader, index: lastNew, entries: entries.count)
    }
}
