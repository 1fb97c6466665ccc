// The rules HostCore plans by: persist before send (a leader's replication sends and heartbeat
// answers excepted), apply only what is committed and after it is stored, a follower's apply
// deferred into the next turn's write, compaction held while an apply waits, one snapshot image at a time.

import EmberRaft
import EmberRaftHost
import Testing

@Suite struct HostCoreRulesTests {
    @Test func aFollowerAcknowledgesEntriesOnlyAfterTheirWrite() {
        var core = followerCore()
        _ = core.handle(.event(append(entries(4...5), prev: 3, commit: 3)))
        let plan = core.handle(.endTurn(inputWaiting: false))
        let write = plan.firstIndex { $0.isPersist }
        let ack = plan.firstIndex { $0.sentMessage.map { if case .appendEntriesResponse = $0.payload { true } else { false } } ?? false }
        #expect(write != nil && ack != nil && write! < ack!)
        #expect(plan[write!].persisted?.entries.map(\.index) == [4, 5])
        #expect(plan[write!].persisted?.report.map { [$0.index, $0.term] } == [5, 1])
    }

    /// A heartbeat answer claims nothing written: it goes out ahead of the turn's write (so a
    /// follower whose write waits behind a long apply keeps its leader's lease); the append's
    /// ack still follows the write.
    @Test func aFollowerAnswersAHeartbeatAheadOfItsWriteAndAcksAfterIt() {
        var core = followerCore()
        _ = core.handle(.event(append(entries(4...5), prev: 3, commit: 3)))
        _ = core.handle(.event(.receive(Message(from: "n1", to: "n3", term: 1, payload: .heartbeat(commit: 3, readContext: 7)))))
        let plan = core.handle(.endTurn(inputWaiting: false))
        let write = plan.firstIndex { $0.isPersist }
        let answer = plan.firstIndex { $0.sentMessage?.payload == .heartbeatResponse(readContext: 7) }
        let ack = plan.firstIndex { $0.sentMessage.map { if case .appendEntriesResponse = $0.payload { true } else { false } } ?? false }
        #expect(write != nil && answer != nil && ack != nil)
        #expect(answer! < write! && write! < ack!)
    }

    @Test func aVoteIsSentOnlyAfterTermAndVoteAreWritten() {
        var core = followerCore()
        _ = core.handle(.event(.receive(Message(from: "n2", to: "n3", term: 2,
                                                payload: .requestVote(lastIndex: 3, lastTerm: 1, leadershipTransfer: true)))))
        let plan = core.handle(.endTurn(inputWaiting: false))
        #expect(plan.count == 2)
        #expect(plan.first?.persisted?.hardState.map { [$0.term] } == [2])
        #expect(plan.first?.persisted?.hardState?.votedFor == "n2")
        #expect(plan.last?.sentMessage?.payload == .requestVoteResponse(granted: true))
        // Term and vote unchanged: a second vote request of the same term writes nothing again.
        _ = core.handle(.event(.receive(Message(from: "n2", to: "n3", term: 2,
                                                payload: .requestVote(lastIndex: 3, lastTerm: 1, leadershipTransfer: true)))))
        #expect(!core.handle(.endTurn(inputWaiting: false)).contains { $0.isPersist })
    }

    /// Thesis 10.2.1: the leader sends its new entries before writing them, and counts its own
    /// copy only once the runtime reports it durable.
    @Test func aLeaderReplicatesBeforeItsWriteAndCommitsOnlyWhatIsDurable() {
        var (core, plan) = leaderCore()
        #expect(core.node.role == .leader)
        let write = plan.firstIndex { $0.isPersist }!
        #expect(plan[write].persisted?.entries.map(\.index) == [4])
        #expect(plan[..<write].allSatisfy { $0.sentMessage?.payload.isReplication == true })
        #expect(plan[..<write].count == 2)  // to n2 and n3
        // n2 holds the no-op, but the leader's own copy is not reported durable yet: no commit.
        _ = core.handle(.event(.receive(Message(from: "n2", to: "n1", term: 2,
                                                payload: .appendEntriesResponse(AppendEntriesResponse(success: true, index: 4))))))
        #expect(!core.handle(.endTurn(inputWaiting: false)).contains { $0.applied != nil })
        #expect(core.node.commitIndex == 3)
        _ = core.handle(.event(.persisted(through: 4, term: 2)))
        let after = core.handle(.endTurn(inputWaiting: false))
        #expect(core.node.commitIndex == 4)
        #expect(after.compactMap(\.applied).flatMap { $0 }.map(\.index) == [4])
    }

    @Test func proposalsAreAnsweredAtOnceAndPlannedWithTheTurn() {
        var (core, _) = leaderCore()
        _ = core.handle(.event(.persisted(through: 4, term: 2)))
        _ = core.handle(.endTurn(inputWaiting: false))
        let outcome = core.handle(.event(.proposeBatch([[1], [2]])))
        #expect(outcome.acceptedProposals.map(\.0) == [5, 6])
        #expect(core.turnPending)
        let plan = core.handle(.endTurn(inputWaiting: false))
        #expect(plan.compactMap(\.persisted).map { $0.entries.map(\.index) } == [[5, 6]])
        var follower = followerCore()
        let refused = follower.handle(.event(.propose([1])))
        #expect(refused == [.proposalRejected(.notLeader(leaderHint: nil))])
        #expect(follower.handle(.endTurn(inputWaiting: false)).isEmpty)
    }

    /// A follower that learns of a commit while more input waits applies in the next turn's
    /// write; a read made ready in that next turn sees the apply first.
    @Test func aFollowersApplyIsCarriedIntoTheNextWrite() {
        var core = followerCore()
        _ = core.handle(.event(append(entries(4...4), prev: 3, commit: 3)))
        var store = ModelStore()
        store.appliedIndex = 3
        store.perform(core.handle(.endTurn(inputWaiting: false)))
        _ = core.handle(.event(.persisted(through: 4, term: 1)))
        store.perform(core.handle(.endTurn(inputWaiting: false)))
        // The commit of 4 arrives with more input waiting: no apply yet.
        _ = core.handle(.event(append([], prev: 4, commit: 4)))
        let held = core.handle(.endTurn(inputWaiting: true))
        #expect(!held.contains { $0.applied != nil } && core.deferredApply.map(\.index) == [4])
        // Compaction must not claim the held entry.
        #expect(core.handle(.compact(index: 4)).isEmpty && core.node.log.snapshotIndex == 0)
        // The next turn appends 5 and applies 4 in the same write.
        _ = core.handle(.event(append(entries(5...5), prev: 4, commit: 4)))
        let next = core.handle(.endTurn(inputWaiting: true))
        let writes = next.compactMap(\.persisted)
        #expect(writes.count == 1 && writes[0].entries.map(\.index) == [5] && writes[0].apply.map(\.index) == [4])
        store.perform(next)
        #expect(store.applied == [4] && core.deferredApply.isEmpty)
        // Carried applies happen at once even with input waiting (at most one turn late).
        _ = core.handle(.event(append([], prev: 5, commit: 5)))
        let held2 = core.handle(.endTurn(inputWaiting: true))
        #expect(!held2.contains { $0.applied != nil } && core.deferredApply.map(\.index) == [5])
        _ = core.handle(.event(.tick))
        let carried = core.handle(.endTurn(inputWaiting: true))
        #expect(carried.compactMap(\.applied).flatMap { $0 }.map(\.index) == [5])
        store.perform(carried)
        #expect(store.applied == [4, 5])
        #expect(core.handle(.compact(index: 5)).count == 1 && core.node.log.snapshotIndex == 5)
    }

    @Test func aReadMadeReadyIsServedAfterTheApplyItWaitsFor() {
        var core = followerCore()
        _ = core.handle(.event(append(entries(4...4), prev: 3, commit: 3)))
        _ = core.handle(.endTurn(inputWaiting: false))
        _ = core.handle(.event(.persisted(through: 4, term: 1)))
        _ = core.handle(.endTurn(inputWaiting: false))
        _ = core.handle(.event(.readIndex(id: 7)))
        _ = core.handle(.endTurn(inputWaiting: false))
        // The leader answers with read index 4 together with the commit of 4, input waiting.
        _ = core.handle(.event(append([], prev: 4, commit: 4)))
        _ = core.handle(.event(.receive(Message(from: "n1", to: "n3", term: 1, payload: .readIndexResponse(id: 7, index: 4)))))
        let plan = core.handle(.endTurn(inputWaiting: true))
        let apply = plan.firstIndex { $0.applied != nil }
        let ready = plan.firstIndex { $0 == .readReady(id: 7, index: 4) }
        #expect(apply != nil && ready != nil && apply! < ready!)
        #expect(core.deferredApply.isEmpty)
    }

    /// Issue 38: a learner's messages go after the voters'. A small one (a commit or two, a
    /// heartbeat) goes just before the turn's write: after it, a learner's copy of a committed
    /// write waited for the leader's sync of the next ones. A big batch goes after the write and
    /// the apply (ahead of them its encoding held them up). Each learner's messages keep their order.
    @Test func aLearnersSmallMessagesGoBeforeTheWriteAndItsBigBatchesAfterIt() {
        var s = PersistentState.bootstrap(voters: voters, learners: ["l1"])
        s.entries = entries(1...3)
        s.hardState = HardState(term: 1, votedFor: nil, commit: 3)
        var core = HostCore(node: RaftNode(id: "n1", config: RaftConfig(electionTick: 10, heartbeatTick: 2, preVote: false),
                                           state: s, appliedIndex: 3))
        _ = core.handle(.event(.campaign))
        _ = core.handle(.endTurn(inputWaiting: false))
        _ = core.handle(.event(.receive(Message(from: "n2", to: "n1", term: 2, payload: .requestVoteResponse(granted: true)))))
        let elected = core.handle(.endTurn(inputWaiting: false))
        #expect(core.node.role == .leader)
        func sends(_ plan: [HostEffect], to peer: NodeID) -> [Int] {
            plan.indices.filter { plan[$0].sentMessage?.to == peer }
        }
        func ack(_ from: NodeID, _ index: UInt64) -> HostInput {
            .event(.receive(Message(from: from, to: "n1", term: 2, payload: .appendEntriesResponse(AppendEntriesResponse(success: true, index: index)))))
        }
        func appended(_ plan: [HostEffect], _ i: Int) -> [UInt64] {
            if case .appendEntries(let a) = plan[i].sentMessage?.payload { return a.entries.map(\.index) }
            return []
        }
        // The no-op's turn: the voters replicated to first, then the learner (its probe is
        // small), all before the write.
        let write = elected.firstIndex { $0.isPersist }!
        let toVoters = sends(elected, to: "n2") + sends(elected, to: "n3")
        let toLearner = sends(elected, to: "l1")
        #expect(!toVoters.isEmpty && toVoters.allSatisfy { $0 < write })
        #expect(!toLearner.isEmpty && toLearner.allSatisfy { $0 < write && $0 > toVoters.max()! })
        // The learner holds 1...3; then the no-op is durable here and at n2: it commits.
        _ = core.handle(ack("l1", 3))
        _ = core.handle(.endTurn(inputWaiting: false))
        _ = core.handle(.event(.persisted(through: 4, term: 2)))
        _ = core.handle(.endTurn(inputWaiting: false))
        _ = core.handle(ack("n2", 4))
        let commit = core.handle(.endTurn(inputWaiting: false))
        #expect(core.node.commitIndex == 4)
        // No write in that turn: the learner is sent the committed no-op last, after the apply;
        // the voters' commit news before the apply.
        let apply = commit.firstIndex { $0.applied?.map(\.index) == [4] }!
        let toLearner4 = sends(commit, to: "l1")
        #expect(toLearner4 == [commit.count - 1] && toLearner4[0] > apply)
        #expect(appended(commit, toLearner4[0]) == [4])
        let toVoter = sends(commit, to: "n2")
        #expect(!toVoter.isEmpty && toVoter.allSatisfy { $0 < apply })
        _ = core.handle(ack("l1", 4))
        _ = core.handle(.endTurn(inputWaiting: false))

        // A big batch: 100 entries committed in a turn that also writes a new one. The learner's
        // batch goes after that write.
        let big = HostCore.learnerSendBeforeWriteMaxEntries + 36
        _ = core.handle(.event(.proposeBatch((0..<big).map { [UInt8($0 & 0xFF)] })))
        _ = core.handle(.endTurn(inputWaiting: false))
        let bigEnd = UInt64(4 + big)
        _ = core.handle(.event(.persisted(through: bigEnd, term: 2)))
        _ = core.handle(.endTurn(inputWaiting: false))
        _ = core.handle(ack("n2", bigEnd))
        _ = core.handle(.event(.propose([7])))
        let late = core.handle(.endTurn(inputWaiting: false))
        #expect(core.node.commitIndex == bigEnd)
        let lateWrite = late.firstIndex { $0.isPersist }!
        #expect(late[lateWrite].persisted?.entries.map(\.index) == [bigEnd + 1])
        let toLearnerBig = sends(late, to: "l1")
        #expect(toLearnerBig.count == 1 && toLearnerBig[0] > lateWrite)
        #expect(appended(late, toLearnerBig[0]) == Array(5...bigEnd))

        // A small one: the next commit, in a turn that writes another entry, goes before it.
        _ = core.handle(ack("l1", bigEnd))
        _ = core.handle(.endTurn(inputWaiting: false))
        _ = core.handle(.event(.persisted(through: bigEnd + 1, term: 2)))
        _ = core.handle(.endTurn(inputWaiting: false))
        _ = core.handle(ack("n2", bigEnd + 1))
        _ = core.handle(.event(.propose([8])))
        let early = core.handle(.endTurn(inputWaiting: false))
        #expect(core.node.commitIndex == bigEnd + 1)
        let earlyWrite = early.firstIndex { $0.isPersist }!
        #expect(early[earlyWrite].persisted?.entries.map(\.index) == [bigEnd + 2])
        let toLearnerSmall = sends(early, to: "l1")
        #expect(toLearnerSmall.count == 1 && toLearnerSmall[0] < earlyWrite)
        #expect(appended(early, toLearnerSmall[0]) == [bigEnd + 1])
        // After the voters' sends of the new entry.
        #expect(sends(early, to: "n2").allSatisfy { $0 < toLearnerSmall[0] })
    }

    @Test func oneSnapshotImageIsPreparedAtATime() {
        var core = followerCore()
        #expect(core.handle(.snapshotUnavailable) == [.prepareSnapshot])
        #expect(core.handle(.snapshotUnavailable).isEmpty)
        #expect(core.handle(.compact(index: 3)).isEmpty)  // the image being written needs the log after it
        _ = core.handle(.snapshotPrepareFailed)
        #expect(core.handle(.compact(index: 3)).count == 1)
        #expect(core.handle(.snapshotUnavailable) == [.prepareSnapshot])
    }
}
