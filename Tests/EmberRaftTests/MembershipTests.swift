// Single-server membership changes (thesis 4.1).

@testable import EmberRaft
import Testing

private func accepted(_ actions: [Action]) -> Bool {
    actions.contains { if case .proposalAccepted = $0 { return true } else { return false } }
}

@Suite struct MembershipTests {
    @Test func addsAVoterWhichCatchesUp() {
        var c = TestCluster(3)
        c.elect("n1")
        for i in 0..<3 { c.propose("n1", "a\(i)") }
        c.deliverAll()
        c.addJoiningNode("n4")
        #expect(c["n4"].membership.voters.isEmpty)
        #expect(accepted(c.step("n1", .proposeConfigChange(.addVoter("n4")))))
        #expect(c["n1"].membership.voters == ["n1", "n2", "n3", "n4"])  // effective on append
        c.deliverAll()
        c.tickAll(3)
        for id in c.ids { #expect(c[id].membership.voters == ["n1", "n2", "n3", "n4"]) }
        #expect(c.payloads("n4") == ["a0", "a1", "a2"])
        #expect(c["n1"].status.progress["n4"]?.matchIndex == c["n1"].log.lastIndex)
        // The new voter counts towards quorum: with n2 and n3 down, n1+n4 (2 of 4) cannot commit.
        c.isolate("n2")
        c.isolate("n3")
        let before = c["n1"].commitIndex
        c.propose("n1", "needs-3-of-4")
        c.deliverAll()
        #expect(c["n1"].commitIndex == before)
        c.heal()
        c.tickAll(2)
        #expect(c["n1"].commitIndex > before)
    }

    @Test func onlyOneChangePendingAtATime() {
        var c = TestCluster(3)
        c.elect("n1")
        c.addJoiningNode("n4")
        c.addJoiningNode("n5")
        #expect(accepted(c.step("n1", .proposeConfigChange(.addVoter("n4")))))
        #expect(c.step("n1", .proposeConfigChange(.addVoter("n5"))) == [.proposalRejected(.configChangePending)])
        c.deliverAll()
        c.tickAll(2)
        #expect(accepted(c.step("n1", .proposeConfigChange(.addVoter("n5")))))
        c.deliverAll()
        c.tickAll(2)
        #expect(c["n5"].membership.voters.count == 5)
    }

    @Test func newLeaderMustCommitItsOwnEntryBeforeAChange() {
        var c = TestCluster(3)
        c.step("n1", .campaign)
        // Deliver only the election messages so n1 leads but its no-op is not committed yet.
        c.deliverAll { m in
            switch m.payload {
            case .preVote, .preVoteResponse, .requestVote, .requestVoteResponse: return true
            default: return false
            }
        }
        #expect(c["n1"].role == .leader)
        #expect(c.step("n1", .proposeConfigChange(.removeVoter("n3"))) == [.proposalRejected(.configChangePending)])
    }

    @Test func followerAdoptsConfigWhenAppendedAndRevertsOnTruncation() {
        let voters = ["n1", "n2", "n3"]
        var state = persisted(voters: voters, terms: [1], currentTerm: 1)
        state.entries.append(LogEntry(index: 2, term: 1, kind: .configChange, data: Membership(voters: voters + ["n4"]).encoded()))
        var c = TestCluster(states: [
            "n1": persisted(voters: voters, terms: [1, 2], currentTerm: 2),
            "n2": persisted(voters: voters, terms: [1, 2], currentTerm: 2),
            "n3": state,
        ], config: TestCluster.config { $0.preVote = false })
        // The uncommitted config entry is in effect on n3 as soon as it is in the log...
        #expect(c["n3"].membership.voters == ["n1", "n2", "n3", "n4"])
        c.elect("n1")
        c.tickAll(2)
        // ...and is undone when the leader overwrites it.
        #expect(c["n3"].membership.voters == voters)
    }

    @Test func removesAFollower() {
        var c = TestCluster(3)
        c.elect("n1")
        #expect(accepted(c.step("n1", .proposeConfigChange(.removeVoter("n3")))))
        c.deliverAll()
        c.tickAll(2)
        #expect(c["n1"].membership.voters == ["n1", "n2"])
        #expect(c["n1"].status.progress["n3"] == nil)
        // The leader stops replicating to n3 once the removal is appended, so n3 may never learn
        // it was removed and will time out (thesis 4.2.3). PreVote + lease keep it harmless.
        let term = c["n1"].term
        c.tickAll(100)
        #expect(c["n1"].role == .leader && c["n1"].term == term && c["n2"].term == term)
        // Two-node cluster still commits.
        c.propose("n1", "two")
        c.deliverAll()
        #expect(c.payloads("n2").last == "two")
    }

    @Test func followerRemovedWhileDownLearnsItFromANotice() {
        var c = TestCluster(3)
        c.elect("n1")
        c.isolate("n3")  // down while it is removed
        #expect(accepted(c.step("n1", .proposeConfigChange(.removeVoter("n3")))))
        c.tickAll(3)
        let removal = c["n1"].configIndex
        #expect(c["n1"].membership.voters == ["n1", "n2"] && c["n1"].commitIndex >= removal)
        #expect(c["n3"].membership.contains("n3") && !c["n3"].isRemoved)
        c.heal()
        let term = c["n1"].term
        // Back up, it campaigns on its stale configuration (its pre-votes fall on the lease).
        c.tick("n3", 40)
        #expect(c["n3"].role == .preCandidate)
        // A notice about an older (or its own) configuration changes nothing...
        c.step("n3", .removedFromCluster(configIndex: c["n3"].configIndex))
        #expect(c["n3"].role == .preCandidate && !c["n3"].status.removed)
        // ...the committed removal does: it stops campaigning for good.
        c.step("n3", .removedFromCluster(configIndex: removal))
        #expect(c["n3"].role == .follower && c["n3"].status.removed && c["n3"].isRemoved)
        _ = c.takeQueue()
        c.tick("n3", 200)
        #expect(c.takeQueue().isEmpty)
        #expect(c["n3"].role == .follower && c["n3"].term <= term)
        #expect(c["n1"].role == .leader && c["n1"].term == term && c["n2"].term == term)
        // Re-added later, the newer configuration from the leader supersedes the notice.
        #expect(accepted(c.step("n1", .proposeConfigChange(.addVoter("n3")))))
        c.tickAll(5)
        #expect(c["n3"].membership.voters == ["n1", "n2", "n3"] && c["n3"].configIndex > removal)
        #expect(!c["n3"].isRemoved && !c["n3"].status.removed && c["n3"].isPromotable)
        #expect(c["n1"].term == term)
    }

    @Test func aLeaderToldItWasRemovedStepsDown() {
        var c = TestCluster(3)
        c.elect("n1")
        c.step("n1", .removedFromCluster(configIndex: c["n1"].configIndex + 5))
        #expect(c["n1"].role == .follower && c["n1"].isRemoved)
        c.tickAll(40)
        #expect(c.leaders.count == 1 && c.leaders[0] != "n1")
    }

    @Test func removedLeaderStepsDownAfterCommit() {
        var c = TestCluster(3)
        c.elect("n1")
        #expect(accepted(c.step("n1", .proposeConfigChange(.removeVoter("n1")))))
        #expect(c["n1"].role == .leader)  // keeps leading (without counting itself) until committed
        c.deliverAll()
        #expect(c["n1"].role == .follower)
        c.tickAll(40)
        #expect(c.leaders.count == 1 && c.leaders[0] != "n1")
        #expect(c["n2"].membership.voters == ["n2", "n3"])
    }

    @Test func rejectsNoopChanges() {
        var c = TestCluster(3)
        c.elect("n1")
        #expect(c.step("n1", .proposeConfigChange(.addVoter("n2"))) == [.proposalRejected(.configChangeNoop)])
        #expect(c.step("n1", .proposeConfigChange(.removeVoter("n9"))) == [.proposalRejected(.configChangeNoop)])
    }

    @Test func configContextTravelsWithTheEntry() {
        var c = TestCluster(3)
        c.elect("n1")
        c.addJoiningNode("n4")
        #expect(c["n1"].membershipContext == nil)  // bootstrap membership: from the snapshot
        let context = Array("n4=127.0.0.1:7004".utf8)
        #expect(accepted(c.step("n1", .proposeConfigChange(.addVoter("n4"), context: context))))
        c.deliverAll()
        c.tickAll(3)
        for id in c.ids {
            #expect(c[id].membership.voters == ["n1", "n2", "n3", "n4"])
            #expect(c[id].membershipContext == context)
        }
        let entry = ConfigEntry(membership: Membership(voters: ["a", "b"]), context: [9, 8])
        #expect(ConfigEntry(decoding: entry.encoded()) == entry)
        #expect(Membership(decoding: entry.encoded()) == nil)  // strict: trailing context is not a voter set
        #expect(ConfigEntry(decoding: Membership(voters: ["a"]).encoded())?.context == [])
    }

    @Test func membershipEncodingRoundTrips() {
        let m = Membership(voters: ["n3", "n1", "nödé-2"])
        #expect(Membership(decoding: m.encoded()) == m)
        #expect(Membership(decoding: [1, 2, 3]) == nil)
    }
}
