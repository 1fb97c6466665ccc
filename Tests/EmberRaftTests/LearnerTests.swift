// Learners (non-voting members): replicated to like followers, never voting, campaigning or
// counting toward the commit and read quorums; added, promoted, demoted and removed by
// single-server changes.

@testable import EmberRaft
import Testing

private func accepted(_ actions: [Action]) -> Bool {
    actions.contains { if case .proposalAccepted = $0 { return true } else { return false } }
}

private func rejection(_ actions: [Action]) -> ProposalRejection? {
    for a in actions { if case .proposalRejected(let r) = a { return r } }
    return nil
}

/// A 3-voter cluster led by n1 with n4 added as a learner and caught up (LearnerBatchTests too).
func clusterWithLearner(_ tweak: (inout RaftConfig) -> Void = { _ in }) -> TestCluster {
    let config = TestCluster.config(tweak)
    var c = TestCluster(3, config: config)
    c.elect("n1")
    for i in 0..<3 { c.propose("n1", "a\(i)") }
    c.deliverAll()
    c.addJoiningNode("n4", config: config)
    let added = c.step("n1", .proposeConfigChange(.addLearner("n4")))
    precondition(accepted(added), "addLearner refused: \(added)")
    c.deliverAll()
    c.tickAll(2)
    return c
}

private func votingMessages(_ actions: [Action]) -> [Message] {
    actions.messages.filter {
        switch $0.payload {
        case .preVote, .requestVote: return true
        default: return false
        }
    }
}

@Suite struct LearnerTests {
    @Test func learnerReceivesTheLogButDoesNotCountTowardCommit() {
        var c = clusterWithLearner()
        for id in c.ids {
            #expect(c[id].membership.voters == ["n1", "n2", "n3"])
            #expect(c[id].membership.learners == ["n4"])
        }
        #expect(c["n4"].isLearner && c["n4"].status.learner && !c["n1"].status.learner)
        #expect(c.payloads("n4") == ["a0", "a1", "a2"])
        #expect(c["n4"].commitIndex == c["n1"].commitIndex)
        // The leader and the learner alone (2 of 4 members, 1 of 3 voters) commit nothing.
        c.isolate("n2")
        c.isolate("n3")
        let before = c["n1"].commitIndex
        c.propose("n1", "needs-a-voter")
        c.deliverAll()
        c.tickAll(3)
        #expect(c["n1"].commitIndex == before)  // the leader and the learner are not a quorum...
        #expect(c["n4"].log.lastIndex == before)  // ...and a learner is sent committed entries only
        c.heal()
        c.tickAll(2)
        #expect(c["n1"].commitIndex > before)
        #expect(c.payloads("n4").last == "needs-a-voter")
    }

    @Test func learnerIsSentCommittedEntriesOnlyAndAppliesThemInTheSameStep() {
        var c = clusterWithLearner()
        let seen = c.allActions["n4"]?.count ?? 0
        var toLearner: [AppendEntries] = []
        for i in 0..<5 {
            c.propose("n1", "w\(i)")
            // Followers first: the learner's messages go out once the voters' acks commit.
            c.deliverAll { m in
                if m.to == "n4", case .appendEntries(let a) = m.payload { toLearner.append(a) }
                return true
            }
        }
        c.tickAll(2)
        #expect(c.payloads("n4") == ["a0", "a1", "a2", "w0", "w1", "w2", "w3", "w4"])
        let carrying = toLearner.filter { !$0.entries.isEmpty }
        #expect(!carrying.isEmpty)
        for a in carrying { #expect(a.entries.last!.index <= a.commit) }
        // A proposal alone sends the learner nothing (it has every committed entry): one
        // message per commit, not one for the entries and another for their commit.
        #expect(toLearner.count == carrying.count)
        // Each append is applied at once (its step's apply ends where it ends): the learner never
        // holds an unapplied tail, so its host writes both in one transaction.
        let actions = Array((c.allActions["n4"] ?? []).dropFirst(seen))
        let appended = actions.compactMap { a -> UInt64? in if case .persistEntries(let es) = a { es.last?.index } else { nil } }
        let applied = Set(actions.compactMap { a -> UInt64? in if case .apply(let es) = a { es.last?.index } else { nil } })
        #expect(!appended.isEmpty)
        for last in appended { #expect(applied.contains(last)) }
        #expect(c["n4"].log.lastIndex == c["n4"].appliedIndex)
        #expect(c["n4"].log.lastIndex == c["n1"].commitIndex)
    }

    /// Delivers everything, holding back the learner's acknowledgements to the leader in
    /// `held` and collecting what the leader sends it with entries in `sent`.
    private func deliverHoldingLearnerAcks(_ c: inout TestCluster, _ held: inout [Message], _ sent: inout [AppendEntries]) {
        c.deliverAll { m in
            if m.to == "n4", case .appendEntries(let a) = m.payload, !a.entries.isEmpty { sent.append(a) }
            if m.from == "n4", case .appendEntriesResponse = m.payload { held.append(m); return false }
            return true
        }
    }

    /// Hands the leader the acknowledgements held back.
    private func release(_ c: inout TestCluster, _ held: inout [Message]) {
        for m in held { _ = c.step(m.to, .receive(m)) }
        held = []
    }

    @Test func learnerHasOneAppendInFlightAndGetsWhatCommittedMeanwhileInTheNext() {
        // No small appends beyond it (the next test), each append answered: the base window alone.
        var c = clusterWithLearner { $0.learnerSmallAppendsMaxEntries = 0; $0.learnerAckMinEntries = 0 }
        var held: [Message] = [], sent: [AppendEntries] = []
        c.propose("n1", "w0")
        deliverHoldingLearnerAcks(&c, &held, &sent)
        #expect(sent.map { $0.entries.map(\.index) } == [[c["n1"].commitIndex]])
        // Nine more commit while the learner's answer is outstanding: none is sent to it yet.
        for i in 1..<10 {
            c.propose("n1", "w\(i)")
            deliverHoldingLearnerAcks(&c, &held, &sent)
        }
        #expect(sent.count == 1)
        #expect(c.payloads("n4").last == "w0")
        #expect(c["n1"].progress["n4"]?.inflight.count == 1)
        // Its answer comes back: one append carries all nine, through the commit index.
        release(&c, &held)
        deliverHoldingLearnerAcks(&c, &held, &sent)
        #expect(sent.count == 2)
        #expect(sent[1].entries.count == 9 && sent[1].entries.last?.index == c["n1"].commitIndex)
        release(&c, &held)
        c.deliverAll()
        #expect(c.payloads("n4") == ["a0", "a1", "a2"] + (0..<10).map { "w\($0)" })
        #expect(c["n1"].progress["n4"]?.matchIndex == c["n1"].commitIndex)
        // Voters keep their own window: n2 was sent each proposal as it came.
        #expect(c["n1"].progress["n2"]?.matchIndex == c["n1"].commitIndex)
    }

    /// Issue 38: while few entries are in flight to a learner, what commits meanwhile goes at
    /// once in another append (with one in flight it waited for the answer, which its leader
    /// takes only between its own writes, and which a learner gives for several appends
    /// together). With more than `learnerSmallAppendsMaxEntries` in flight nothing more goes
    /// until an answer: under load a learner's batches stay self-clocked.
    @Test func aLearnerGetsSmallAppendsWhileFewEntriesAreInFlight() {
        var c = clusterWithLearner { $0.learnerSmallAppendsMaxEntries = 4; $0.learnerAckMinEntries = 0 }
        var held: [Message] = [], sent: [AppendEntries] = []
        for i in 0..<8 {
            c.propose("n1", "w\(i)")
            deliverHoldingLearnerAcks(&c, &held, &sent)
        }
        // w0 to w4 went at once, one append each; then five entries were in flight, more
        // than four: w5 to w7 wait.
        #expect(sent.map(\.entries.count) == [1, 1, 1, 1, 1])
        #expect(c["n1"].progress["n4"]?.inflight.count == 5)
        #expect(c.payloads("n4").suffix(5) == ["w0", "w1", "w2", "w3", "w4"])
        // The first answer leaves four in flight: the three go in one append.
        release(&c, &held)
        deliverHoldingLearnerAcks(&c, &held, &sent)
        #expect(sent.count == 6 && sent[5].entries.count == 3 && sent[5].entries.last?.index == c["n1"].commitIndex)
        // Three in flight: w8 and w9 go at once, then five are: w10 waits for an answer.
        for i in 8..<11 {
            c.propose("n1", "w\(i)")
            deliverHoldingLearnerAcks(&c, &held, &sent)
        }
        #expect(sent.count == 8)
        #expect(c["n1"].progress["n4"]?.inflight.count == 3)
        release(&c, &held)
        deliverHoldingLearnerAcks(&c, &held, &sent)
        #expect(sent.count == 9 && sent[8].entries.map(\.index) == [c["n1"].commitIndex])
        release(&c, &held)
        c.deliverAll()
        #expect(c.payloads("n4") == ["a0", "a1", "a2"] + (0..<11).map { "w\($0)" })
        #expect(c["n1"].progress["n4"]?.matchIndex == c["n1"].commitIndex)
    }

    @Test func aLearnersBatchIsBoundedByItsOwnEntryLimit() {
        var c = clusterWithLearner { $0.maxEntriesPerLearnerMessage = 4; $0.learnerSmallAppendsMaxEntries = 0; $0.learnerAckMinEntries = 0 }
        var held: [Message] = [], sent: [AppendEntries] = []
        c.propose("n1", "w0")
        deliverHoldingLearnerAcks(&c, &held, &sent)
        for i in 1..<11 {
            c.propose("n1", "w\(i)")
            deliverHoldingLearnerAcks(&c, &held, &sent)
        }
        // Ten entries wait: sent four, four and two, each after the previous one's answer.
        while !held.isEmpty {
            release(&c, &held)
            deliverHoldingLearnerAcks(&c, &held, &sent)
        }
        #expect(sent.map(\.entries.count) == [1, 4, 4, 2])
        #expect(c.payloads("n4") == ["a0", "a1", "a2"] + (0..<11).map { "w\($0)" })
    }

    /// Issue 38: a learner answers its small appends together (`learnerAckMinEntries`), so at a
    /// low write rate the leader handles one answer per several commits instead of one each;
    /// the leader meanwhile keeps sending each commit at once (`learnerSmallAppendsMaxEntries`).
    @Test func aLearnerAnswersSmallAppendsTogether() {
        var c = clusterWithLearner { $0.learnerAckMinEntries = 4 }
        var answers: [AppendEntriesResponse] = [], sent: [AppendEntries] = []
        func deliver(_ c: inout TestCluster) {
            c.deliverAll { m in
                if m.to == "n4", case .appendEntries(let a) = m.payload, !a.entries.isEmpty { sent.append(a) }
                if m.from == "n4", case .appendEntriesResponse(let r) = m.payload { answers.append(r) }
                return true
            }
        }
        for i in 0..<3 {
            c.propose("n1", "w\(i)")
            deliver(&c)
        }
        // Each commit went at once, none was answered yet.
        #expect(sent.map(\.entries.count) == [1, 1, 1])
        #expect(answers.isEmpty)
        #expect(c.payloads("n4").suffix(3) == ["w0", "w1", "w2"])
        #expect(c["n1"].progress["n4"]?.inflight.count == 3)
        // The fourth: one answer for all four.
        c.propose("n1", "w3")
        deliver(&c)
        #expect(sent.count == 4)
        #expect(answers.map(\.index) == [c["n1"].commitIndex] && answers.allSatisfy(\.success))
        #expect(c["n1"].progress["n4"]?.matchIndex == c["n1"].commitIndex)
        #expect(c["n1"].progress["n4"]?.inflight.isEmpty == true)
    }

    /// A held answer goes on the learner's next tick, or before its answer to the leader's next
    /// heartbeat (which restarts a pipeline without progress): the leader hears of every entry.
    @Test func aLearnersHeldAnswerGoesOnItsTickOrBeforeItsHeartbeatAnswer() {
        var c = clusterWithLearner()  // the default: 32 entries
        c.propose("n1", "w0")
        c.deliverAll()
        let commit = c["n1"].commitIndex
        #expect(c.payloads("n4").last == "w0")
        #expect(c["n1"].progress["n4"]?.matchIndex == commit - 1)
        let onTick = c.step("n4", .tick).messages
        #expect(onTick.count == 1)
        if case .appendEntriesResponse(let r) = onTick.first?.payload { #expect(r.success && r.index == commit) } else { Issue.record("no answer on the tick: \(onTick)") }
        c.deliverAll()
        #expect(c["n1"].progress["n4"]?.matchIndex == commit)

        c.propose("n1", "w1")
        c.deliverAll()
        let heartbeat = Message(from: "n1", to: "n4", term: c["n1"].term, payload: .heartbeat(commit: commit, readContext: 0))
        let kinds = c.step("n4", .receive(heartbeat)).messages.map { m -> String in
            switch m.payload {
            case .appendEntriesResponse(let r): return "ack \(r.index)"
            case .heartbeatResponse: return "heartbeat"
            default: return "other"
            }
        }
        #expect(kinds == ["ack \(commit + 1)", "heartbeat"])
    }

    /// A voter (a promoted learner holding its promotion) answers every append at once: the
    /// commit quorum counts its answers.
    @Test func aPromotedLearnerAnswersEveryAppendAtOnce() {
        var c = clusterWithLearner()
        #expect(accepted(c.step("n1", .proposeConfigChange(.promoteLearner("n4")))))
        c.deliverAll()
        #expect(!c["n4"].isLearner)
        for i in 0..<3 {
            c.propose("n1", "v\(i)")
            var answered = false
            c.deliverAll { m in
                if m.from == "n4", case .appendEntriesResponse(let r) = m.payload, r.success { answered = true }
                return true
            }
            #expect(answered)
            #expect(c["n1"].progress["n4"]?.matchIndex == c["n1"].log.lastIndex)
        }
    }

    @Test func losingTheLearnerDoesNotStopCommits() {
        var c = clusterWithLearner()
        c.isolate("n4")
        let before = c["n1"].commitIndex
        c.propose("n1", "without-learner")
        c.deliverAll()
        #expect(c["n1"].commitIndex == before + 1)
    }

    @Test func learnerNeverCampaignsOrVotesInTheQuorum() {
        var c = clusterWithLearner()
        c.isolate("n4")
        var sent: [Message] = []
        for _ in 0..<60 { sent += votingMessages(c.step("n4", .tick)) }
        sent += votingMessages(c.step("n4", .campaign))
        sent += votingMessages(c.step("n4", .receive(Message(from: "n1", to: "n4", term: c["n4"].term, payload: .timeoutNow))))
        #expect(sent.isEmpty)
        #expect(c["n4"].role == .follower && c["n4"].term == c["n1"].term)
        // Leadership cannot be handed to a learner either.
        c.heal()
        c.step("n1", .transferLeadership(to: "n4"))
        c.deliverAll()
        c.tickAll(3)
        #expect(c["n1"].role == .leader)
        // A candidate's quorum counts voters only: n2 cannot win with n4's vote and its own.
        c.isolate("n1")
        c.isolate("n3")
        c.cut.remove(["n2", "n4"])
        c.step("n2", .campaign)
        c.deliverAll()
        c.tickAll(30)
        #expect(c["n2"].role != .leader)
    }

    @Test func readIndexQuorumCountsVotersOnly() {
        var c = clusterWithLearner()
        c.isolate("n2")
        c.isolate("n3")
        c.cut.remove(["n1", "n4"])
        c.step("n1", .readIndex(id: 7))
        c.tickAll(3)
        #expect(!(c.events["n1"] ?? []).contains(.readReady(id: 7, index: c["n1"].commitIndex)))
        c.heal()
        c.tickAll(2)
        #expect((c.events["n1"] ?? []).contains { if case .readReady(7, _) = $0 { true } else { false } })
        // A read through the learner goes to the leader and completes at the learner.
        c.step("n4", .readIndex(id: 9))
        c.deliverAll()
        c.tickAll(2)
        #expect((c.events["n4"] ?? []).contains { if case .readReady(9, _) = $0 { true } else { false } })
    }

    @Test func promotionIsRefusedWhileBehindThenAllowed() {
        var c = clusterWithLearner { $0.maxPromotionLag = 2 }
        c.isolate("n4")
        for i in 0..<5 { c.propose("n1", "b\(i)") }
        c.deliverAll()
        let lag = c["n1"].log.lastIndex - c["n1"].status.progress["n4"]!.matchIndex
        #expect(rejection(c.step("n1", .proposeConfigChange(.promoteLearner("n4")))) == .learnerBehind("n4", lag: lag, limit: 2))
        // Naming it as a voter is the same promotion, with the same check.
        #expect(rejection(c.step("n1", .proposeConfigChange(.addVoter("n4")))) == .learnerBehind("n4", lag: lag, limit: 2))
        #expect(c["n1"].membership.learners == ["n4"])
        c.heal()
        c.tickAll(3)
        #expect(accepted(c.step("n1", .proposeConfigChange(.promoteLearner("n4")))))
        c.deliverAll()
        c.tickAll(2)
        for id in c.ids {
            #expect(c[id].membership.voters == ["n1", "n2", "n3", "n4"] && c[id].membership.learners.isEmpty)
        }
        #expect(!c["n4"].isLearner)
        // Now it votes: n2 and n3 down, n1 + n4 are 2 of 4, not a quorum; n4 can campaign.
        c.isolate("n2")
        c.isolate("n3")
        let before = c["n1"].commitIndex
        c.propose("n1", "needs-3-of-4")
        c.deliverAll()
        #expect(c["n1"].commitIndex == before)
        c.heal()
        c.isolate("n1")
        c.tickAll(40)
        #expect(c.leaders.contains { $0 != "n1" })
    }

    /// Issue 38: a learner may acknowledge before its write is durable (its host syncs lazily).
    /// Promoted, it is a voter in the leader's configuration at once, but it knows it only once
    /// it holds the promotion: what it acknowledges before that is a learner's acknowledgement.
    /// The leader counts it toward the commit quorum only from the promotion on (the simulator
    /// committed an entry on such an acknowledgement, held durably by 2 of the 4 voters).
    @Test func aPromotedLearnerCountsTowardCommitOnlyOnceItHoldsItsPromotion() {
        // Every append answered at once: the learner's answer to the entry is in this step.
        var c = clusterWithLearner { $0.maxEntriesPerMessage = 1; $0.learnerAckMinEntries = 0 }
        c.isolate("n3")
        let before = c["n1"].commitIndex
        c.propose("n1", "before-promotion")
        let entry = c["n1"].log.lastIndex
        #expect(accepted(c.step("n1", .proposeConfigChange(.promoteLearner("n4")))))
        let promotion = c["n1"].log.lastIndex
        #expect(promotion == entry + 1 && c["n1"].membership.voters == ["n1", "n2", "n3", "n4"])
        // n2 gets both; n4 the entry but not its promotion: it acknowledges the entry as a learner.
        c.deliverAll { m in
            guard m.to == "n4", case .appendEntries(let a) = m.payload else { return true }
            return !a.entries.contains { $0.index == promotion }
        }
        #expect(c["n4"].log.lastIndex == entry && c["n4"].isLearner)
        #expect(c["n1"].progress["n4"]?.matchIndex == entry && c["n1"].progress["n2"]?.matchIndex == promotion)
        // Durable on n1 and n2 only, 2 of the 4 voters: not committed.
        #expect(c["n1"].commitIndex == before)
        // n4 holds its promotion (a voter's write, synced before its answer): now it counts.
        c.tickAll(6)
        #expect(c["n4"].log.lastIndex >= promotion && !c["n4"].isLearner)
        #expect(c["n1"].commitIndex >= promotion)
        #expect(c.payloads("n4").last == "before-promotion")
    }

    @Test func promotingANonLearnerIsANoop() {
        var c = clusterWithLearner()
        #expect(rejection(c.step("n1", .proposeConfigChange(.promoteLearner("n2")))) == .configChangeNoop)
        #expect(rejection(c.step("n1", .proposeConfigChange(.promoteLearner("n9")))) == .configChangeNoop)
        #expect(rejection(c.step("n1", .proposeConfigChange(.addLearner("n2")))) == .configChangeNoop)
        #expect(rejection(c.step("n1", .proposeConfigChange(.demoteVoter("n4")))) == .configChangeNoop)
    }

    @Test func demotedVoterKeepsReplicatingButStopsVoting() {
        var c = clusterWithLearner()
        #expect(accepted(c.step("n1", .proposeConfigChange(.demoteVoter("n3")))))
        c.deliverAll()
        c.tickAll(2)
        #expect(c["n3"].membership.voters == ["n1", "n2"] && c["n3"].membership.learners == ["n3", "n4"])
        #expect(c["n3"].isLearner && !c["n3"].isRemoved)
        // Two voters: n1 and n2 commit alone, and n3 still receives everything.
        c.isolate("n3")
        let before = c["n1"].commitIndex
        c.propose("n1", "two-voters")
        c.deliverAll()
        #expect(c["n1"].commitIndex == before + 1)
        c.heal()
        c.tickAll(2)
        #expect(c.payloads("n3").last == "two-voters")
    }

    @Test func demotedLeaderStepsDownOnceItCommits() {
        var c = clusterWithLearner()
        #expect(accepted(c.step("n1", .proposeConfigChange(.demoteVoter("n1")))))
        c.deliverAll()
        c.tickAll(2)
        #expect(c["n1"].role == .follower && c["n1"].isLearner)
        c.tickAll(40)
        let leaders = c.leaders
        #expect(leaders.count == 1 && leaders.allSatisfy { ["n2", "n3"].contains($0) })
        // The new leader replicates to both learners.
        c.propose(leaders[0], "after")
        c.deliverAll()
        c.tickAll(2)
        #expect(c.payloads("n1").last == "after" && c.payloads("n4").last == "after")
    }

    @Test func learnersAreLimited() {
        var c = clusterWithLearner { $0.maxLearners = 1 }
        c.addJoiningNode("n5", config: TestCluster.config { $0.maxLearners = 1 })
        #expect(rejection(c.step("n1", .proposeConfigChange(.addLearner("n5")))) == .tooManyLearners(limit: 1))
        // Demoting a voter would make a second learner too.
        #expect(rejection(c.step("n1", .proposeConfigChange(.demoteVoter("n2")))) == .tooManyLearners(limit: 1))
    }

    @Test func removedLearnerIsNoLongerReplicatedTo() {
        var c = clusterWithLearner()
        #expect(accepted(c.step("n1", .proposeConfigChange(.removeVoter("n4")))))
        c.deliverAll()
        c.tickAll(2)
        #expect(c["n1"].membership.learners.isEmpty)
        #expect(c["n4"].isRemoved)
        #expect(c["n1"].status.progress["n4"] == nil)
        c.propose("n1", "after-removal")
        c.deliverAll()
        #expect(!c.payloads("n4").contains("after-removal"))
    }

    @Test func learnerBehindTheLogStartGetsASnapshotThatNamesItALearner() {
        var c = clusterWithLearner()
        c.isolate("n4")
        for i in 0..<6 { c.propose("n1", "s\(i)") }
        c.deliverAll()
        c.step("n1", .compact(index: c["n1"].appliedIndex))
        c.heal()
        c.tickAll(2)
        #expect(c["n1"].status.progress["n4"]?.state == .snapshot)
        c.provideImage("n1", Array(0..<10))
        for _ in 0..<10 { c.tickAll(1) }
        let restored = (c.events["n4"] ?? []).compactMap { if case .restoreSnapshot(let s) = $0 { return s } else { return nil } }
        #expect(restored.count == 1)
        #expect(restored.first?.membership == Membership(voters: ["n1", "n2", "n3"], learners: ["n4"]))
        #expect(c["n4"].isLearner && c["n4"].commitIndex == c["n1"].commitIndex)
    }

    /// A learner's store keeps no log rows and its last applies may not be on disk when its
    /// machine stops (docs/CLUSTER.md "Learners"): restarted, it holds the state of some index
    /// below what it acknowledged, as a snapshot with no log after it. The leader sees a
    /// rejection below its match index (`followerLostLog`) and sends the lost entries again, with
    /// a write following and in an idle cluster (the heartbeat's commit claim past its log).
    @Test(arguments: [true, false])
    func learnerWhoseLogWentBackIsSentTheLostEntriesAgain(writeFollows: Bool) {
        var c = clusterWithLearner()
        for i in 0..<6 { c.propose("n1", "w\(i)") }
        c.deliverAll()
        c.tickAll(2)
        let acked = c["n1"].progress["n4"]!.matchIndex
        #expect(acked == c["n1"].commitIndex && c.payloads("n4").last == "w5")
        // Back to 3 entries before what it acknowledged: its state as of `kept`, a log after it.
        let kept = acked - 3
        let membership = c["n4"].membership
        let state = PersistentState(hardState: HardState(term: c["n4"].term, votedFor: nil, commit: kept),
                                    snapshot: SnapshotMetadata(index: kept, term: c["n4"].log.term(at: kept)!, membership: membership),
                                    entries: [])
        c.nodes["n4"] = RaftNode(id: "n4", config: c["n4"].config, state: state, appliedIndex: kept)
        c.applied["n4"] = Array(c.applied["n4"]!.prefix { $0.index <= kept })
        #expect(c["n4"].isLearner && c.payloads("n4").last == "w2")
        if writeFollows { c.propose("n1", "after") }
        for _ in 0..<6 {
            c.tickAll(1, deliver: false)
            c.deliverAll()
        }
        let expected = ["a0", "a1", "a2"] + (0..<6).map { "w\($0)" } + (writeFollows ? ["after"] : [])
        #expect(c.payloads("n4") == expected, "each entry applied once, in order, none missing")
        #expect(c["n4"].commitIndex == c["n1"].commitIndex && c["n4"].log.lastIndex == c["n1"].commitIndex)
        #expect(c["n1"].progress["n4"]!.matchIndex == c["n1"].commitIndex)
        #expect((c.events["n4"] ?? []).allSatisfy { if case .restoreSnapshot = $0 { false } else { true } },
                "the leader still held the entries: no snapshot")
    }

    @Test func learnerStaysALearnerAcrossARestart() {
        let c = clusterWithLearner()
        // The config entry is in n4's log (as its host persisted it): a restart reads it back.
        let state = PersistentState(hardState: c["n4"].hardState, snapshot: c["n4"].log.snapshot, entries: c["n4"].log.entries)
        let restarted = RaftNode(id: "n4", config: TestCluster.config(), state: state)
        #expect(restarted.isLearner && restarted.membership.learners == ["n4"])
        // And from a snapshot's metadata alone (its log compacted away).
        let bootstrapped = RaftNode(id: "n5", config: TestCluster.config(), state: .bootstrap(voters: ["n1"], learners: ["n5"]))
        #expect(bootstrapped.isLearner && !bootstrapped.isRemoved)
    }

    @Test func encodingWithoutLearnersIsTheOriginalOne() {
        let plain = Membership(voters: ["n2", "n1"])
        // count 2, then "n1", "n2": the format builds before learners read.
        #expect(plain.encoded() == [2, 0, 0, 0, 2, 0, 0, 0, 110, 49, 2, 0, 0, 0, 110, 50])
        let mixed = Membership(voters: ["n1", "n2"], learners: ["n3", "n1"])
        #expect(mixed.learners == ["n3"])  // a voter named as a learner stays a voter
        let bytes = mixed.encoded()
        #expect(Membership(decoding: bytes) == mixed)
        // The voter count carries the flag: a reader without learners would need 2^31 ids.
        #expect(bytes[3] & 0x80 != 0)
        let entry = ConfigEntry(membership: mixed, context: Array("ctx".utf8))
        #expect(ConfigEntry(decoding: entry.encoded()) == entry)
        // Truncations and absurd counts are malformed, not crashes or long loops.
        for n in 0..<bytes.count { #expect(Membership(decoding: Array(bytes.prefix(n))) == nil) }
        #expect(Membership(decoding: [0xFF, 0xFF, 0xFF, 0x7F]) == nil)
        #expect(Membership(decoding: [0, 0, 0, 0x80, 0, 0, 0, 0]) == nil)  // flagged, zero learners
    }
}
