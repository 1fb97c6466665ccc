// Issue 38: a leader holds a learner's committed entries until `learnerBatchMinEntries` are
// pending, its host's `.flushLearners` or its tick (RaftNode+LearnerBatch).

@testable import EmberRaft
import Testing

/// Proposes `payload` at n1 and delivers everything, collecting the appends with entries sent to n4.
private func commit(_ c: inout TestCluster, _ payload: String, _ sent: inout [AppendEntries]) {
    c.propose("n1", payload)
    c.deliverAll { m in
        if m.to == "n4", case .appendEntries(let a) = m.payload, !a.entries.isEmpty { sent.append(a) }
        return true
    }
}

@Suite struct LearnerBatchTests {
    @Test func fewCommittedEntriesWaitForTheBatchMinimum() {
        var c = clusterWithLearner { $0.learnerBatchMinEntries = 3 }
        #expect(!c["n1"].learnerSendsHeld)
        var sent: [AppendEntries] = []
        commit(&c, "w0", &sent)
        commit(&c, "w1", &sent)
        // Committed on the voters, held from the learner.
        #expect(sent.isEmpty)
        #expect(c["n1"].learnerSendsHeld)
        #expect(c["n2"].commitIndex == c["n1"].commitIndex)
        #expect(c.payloads("n4").last == "a2")
        // The third pending entry sends all three in one append, through the commit index.
        commit(&c, "w2", &sent)
        #expect(sent.map(\.entries.count) == [3])
        #expect(sent.first?.entries.last?.index == c["n1"].commitIndex)
        #expect(!c["n1"].learnerSendsHeld)
        #expect(c.payloads("n4").suffix(3) == ["w0", "w1", "w2"])
    }

    @Test func theHostsFlushSendsWhatIsHeld() {
        var c = clusterWithLearner { $0.learnerBatchMinEntries = 8 }
        var sent: [AppendEntries] = []
        commit(&c, "w0", &sent)
        commit(&c, "w1", &sent)
        #expect(sent.isEmpty && c["n1"].learnerSendsHeld)
        let flushed = c.step("n1", .flushLearners).messages
        #expect(flushed.count == 1 && flushed.first?.to == "n4")
        if case .appendEntries(let a) = flushed.first?.payload {
            #expect(a.entries.count == 2 && a.entries.last?.index == c["n1"].commitIndex)
        } else {
            Issue.record("the flush sent no append: \(flushed)")
        }
        #expect(!c["n1"].learnerSendsHeld)
        c.deliverAll()
        #expect(c.payloads("n4").suffix(2) == ["w0", "w1"])
        // Nothing held: a flush sends nothing (no empty append).
        #expect(c.step("n1", .flushLearners).messages.isEmpty)
        // A follower ignores it.
        #expect(c.step("n2", .flushLearners).messages.isEmpty)
    }

    @Test func theLeadersTickSendsWhatIsHeld() {
        var c = clusterWithLearner { $0.learnerBatchMinEntries = 8 }
        var sent: [AppendEntries] = []
        commit(&c, "w0", &sent)
        #expect(sent.isEmpty && c["n1"].learnerSendsHeld)
        let onTick = c.step("n1", .tick).messages.filter { m in
            if m.to == "n4", case .appendEntries(let a) = m.payload { !a.entries.isEmpty } else { false }
        }
        #expect(onTick.count == 1)
        #expect(!c["n1"].learnerSendsHeld)
        c.deliverAll()
        #expect(c.payloads("n4").last == "w0")
        #expect(c["n4"].appliedIndex == c["n1"].commitIndex)
    }

    @Test func withoutAMinimumEachCommitGoesAtOnce() {
        var c = clusterWithLearner { $0.learnerBatchMinEntries = 0 }
        var sent: [AppendEntries] = []
        for i in 0..<3 { commit(&c, "w\(i)", &sent) }
        #expect(sent.map(\.entries.count) == [1, 1, 1])
        #expect(!c["n1"].learnerSendsHeld)
    }

    /// Voters are never held, and a promoted learner is a voter: it is sent each entry at once.
    @Test func votersAndAPromotedLearnerAreNeverHeld() {
        var c = clusterWithLearner { $0.learnerBatchMinEntries = 64 }
        var toVoter = 0
        c.propose("n1", "w0")
        c.deliverAll { m in
            if m.to == "n2", case .appendEntries(let a) = m.payload, !a.entries.isEmpty { toVoter += 1 }
            return true
        }
        #expect(toVoter == 1)
        #expect(c["n1"].learnerSendsHeld)
        #expect(c.step("n1", .proposeConfigChange(.promoteLearner("n4"))).contains { if case .proposalAccepted = $0 { true } else { false } })
        c.deliverAll()
        #expect(c["n1"].membership.voters.contains("n4"))
        var sent: [AppendEntries] = []
        commit(&c, "w1", &sent)
        #expect(!sent.isEmpty)
        #expect(c.payloads("n4").last == "w1")
    }

    /// Losing leadership forgets what was held: the next leader replicates on its own terms.
    @Test func aDeposedLeaderHoldsNothing() {
        var c = clusterWithLearner { $0.learnerBatchMinEntries = 8 }
        var sent: [AppendEntries] = []
        commit(&c, "w0", &sent)
        #expect(c["n1"].learnerSendsHeld)
        let higher = Message(from: "n2", to: "n1", term: c["n1"].term + 1, payload: .heartbeat(commit: 0, readContext: 0))
        c.step("n1", .receive(higher))
        #expect(c["n1"].role == .follower && !c["n1"].learnerSendsHeld)
    }
}
