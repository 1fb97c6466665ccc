// A follower of a three-voter cluster commits an entry once its own copy and the leader's are
// durable (`.leaderDurable`), without the acknowledgement round and the leader's commit index.

@testable import EmberRaft
import Testing

@Suite struct FollowerCommitTests {
    static func isDurableNotice(_ m: Message) -> Bool {
        if case .leaderDurable = m.payload { return true } else { return false }
    }

    /// `n` voters led by n1, settled; from then on the disks of `manual` report by hand.
    static func settled(_ n: Int, manual: Set<NodeID>) -> TestCluster {
        var c = TestCluster(n)
        c.elect("n1")
        c.deliverAll()
        c.tickAll(2)
        c.manualPersist = manual
        return c
    }

    /// n1 leads; its own disk reports by hand. Returns the index of the entry proposed with
    /// n2's copy durable, its acknowledgement to n1 dropped, and n3 cut off.
    static func proposedWithAckDropped(_ c: inout TestCluster) -> UInt64 {
        c.isolate("n3")
        c.propose("n1", "x")
        let index = c["n1"].log.lastIndex
        // n2 appends (durable at once) and answers; the answer is lost.
        c.deliverAll { !($0.from == "n2" && $0.to == "n1") }
        #expect(c["n2"].log.lastIndex == index)
        #expect(c["n2"].commitIndex < index, "nothing says yet that the leader has it")
        return index
    }

    @Test func aFollowerCommitsWhenItsCopyAndTheLeadersAreDurable() {
        var c = Self.settled(3, manual: ["n1"])
        let index = Self.proposedWithAckDropped(&c)
        let actions = c.step("n1", .persisted(through: index, term: c["n1"].term))
        #expect(c["n1"].commitIndex < index, "the leader has no acknowledgement: it cannot commit")
        #expect(actions.messages.filter(Self.isDurableNotice).map(\.to).sorted() == ["n2", "n3"])
        let inferredBefore = c["n2"].status.inferredCommits
        c.deliverAll { !($0.from == "n2" && $0.to == "n1") }
        #expect(c["n2"].commitIndex == index && c["n2"].status.inferredCommits == inferredBefore + 1)
        #expect(c.payloads("n2").last == "x", "applied on the follower")
        #expect(c["n1"].commitIndex < index)
        // The cluster converges as before once the acknowledgements flow.
        c.heal()
        c.manualPersist = []
        c.tickAll(3)
        for id in c.ids { #expect(c[id].commitIndex == index && c.payloads(id).last == "x") }
    }

    @Test func theNoticeFirstThenTheFollowersOwnDurability() {
        var c = Self.settled(3, manual: ["n1", "n2"])
        c.propose("n1", "y")
        let index = c["n1"].log.lastIndex
        c.step("n1", .persisted(through: index, term: c["n1"].term))
        // n2 receives the entry and the notice; its own write is not durable yet.
        c.deliverAll { $0.to == "n2" }
        #expect(c["n2"].log.lastIndex == index && c["n2"].commitIndex < index)
        c.step("n2", .persisted(through: index, term: c["n2"].term))
        #expect(c["n2"].commitIndex == index)
    }

    @Test func fiveVotersWaitForTheLeadersCommitIndex() {
        var c = Self.settled(5, manual: ["n1"])
        c.propose("n1", "z")
        let index = c["n1"].log.lastIndex
        c.deliverAll { !($0.to == "n1") }
        let actions = c.step("n1", .persisted(through: index, term: c["n1"].term))
        #expect(actions.messages.filter(Self.isDurableNotice).isEmpty)
        // Even a notice, were one sent, proves only two of five.
        c.step("n2", .receive(Message(from: "n1", to: "n2", term: c["n1"].term, payload: .leaderDurable(index: index))))
        #expect(c["n2"].commitIndex < index)
    }

    @Test func anEntryOfAnEarlierTermIsNotCommittedByTheNotice() {
        // n2 holds index 3 from term 2 (never committed); the leader of term 3 says its log is
        // durable through 3 — but its entry 3 may differ: only current-term entries count.
        var n2 = RaftNode(id: "n2", config: TestCluster.config(), state: persisted(voters: ["n1", "n2", "n3"], terms: [1, 1, 2], currentTerm: 3))
        _ = n2.step(.receive(Message(from: "n1", to: "n2", term: 3, payload: .leaderDurable(index: 3))))
        #expect(n2.commitIndex == 0)
        // A current-term entry appended after it commits it and everything before.
        _ = n2.step(.receive(Message(from: "n1", to: "n2", term: 3, payload: .appendEntries(AppendEntries(
            prevIndex: 3, prevTerm: 2, entries: [LogEntry(index: 4, term: 3, kind: .noop, data: [])], commit: 0)))))
        _ = n2.step(.persisted(through: 4, term: 3))
        #expect(n2.commitIndex == 0, "the notice said 3: entry 4 is not known durable at the leader")
        _ = n2.step(.receive(Message(from: "n1", to: "n2", term: 3, payload: .leaderDurable(index: 4))))
        #expect(n2.commitIndex == 4)
    }

    @Test func aNoticeOfAnEarlierTermIsIgnored() {
        var n2 = RaftNode(id: "n2", config: TestCluster.config(), state: persisted(voters: ["n1", "n2", "n3"], terms: [1, 2], currentTerm: 2))
        _ = n2.step(.receive(Message(from: "n1", to: "n2", term: 1, payload: .leaderDurable(index: 2))))
        #expect(n2.commitIndex == 0)
    }

    @Test func aNoticeFromTheLeaderOfAnEarlierTermDoesNotCountForTheNext() {
        var n2 = RaftNode(id: "n2", config: TestCluster.config(), state: persisted(voters: ["n1", "n2", "n3"], terms: [1, 2], currentTerm: 2))
        _ = n2.step(.receive(Message(from: "n1", to: "n2", term: 2, payload: .leaderDurable(index: 5))))
        #expect(n2.commitIndex == 2, "entry 2 is of n1's term and durable on both")
        // n3 leads term 3; its entry 3 is durable here, but nothing says it is durable at n3.
        _ = n2.step(.receive(Message(from: "n3", to: "n2", term: 3, payload: .appendEntries(AppendEntries(
            prevIndex: 2, prevTerm: 2, entries: [LogEntry(index: 3, term: 3, kind: .noop, data: [])], commit: 0)))))
        _ = n2.step(.persisted(through: 3, term: 3))
        #expect(n2.commitIndex == 2)
    }

    @Test func anUncommittedConfigurationChangeSuspendsIt() {
        // Four voters, n4 removed: the change's entry makes three, but until it commits the
        // follower does not count on the new majority (conservative: single-server changes keep
        // majorities overlapping, but the rule stays as simple as the proof).
        var c = Self.settled(4, manual: ["n1"])
        c.step("n1", .proposeConfigChange(.removeVoter("n4")))
        let configIndex = c["n1"].log.lastIndex
        c.propose("n1", "w")
        let index = c["n1"].log.lastIndex
        c.deliverAll { $0.to == "n2" }
        #expect(c["n2"].configIndex == configIndex && c["n2"].membership.voters.count == 3 && c["n2"].commitIndex < configIndex)
        c.step("n2", .receive(Message(from: "n1", to: "n2", term: c["n1"].term, payload: .leaderDurable(index: index))))
        #expect(c["n2"].commitIndex < configIndex)
    }
}
