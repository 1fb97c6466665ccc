import EmberCore
import Foundation
import Logging
import Testing
import EmberTestSupport

@testable import EmberCluster
@testable import EmberNodeStore
@testable import EmberStorage

/// A follower applies on its own when its leader's commit index comes without new entries; the
/// leader's next entries arrive while that apply's transaction still has to commit. Their append
/// waits behind it with the loop awaiting it; the follower answered nothing, heartbeats
/// included, for two syncs (~600 ms at 300 ms per sync): with both followers so, the leader
/// failed its check-quorum and stepped down (test_read_your_writes.py, under load). Now the
/// transport's handler answers heartbeats while the loop is held (`StalledLoopHeartbeats`). Here one
/// follower's queued apply is held on its writer before its commit for longer than any election
/// timeout, and the leader's next writes reach it meanwhile: the leader must keep hearing from it.
@Suite(.serialized) struct FollowerPersistBehindApplyTests {
    /// Event: the leader heard from `follower` longer than any election timeout (with room to
    /// spare) after `since`. A new term anywhere fails it at once instead of at the deadline.
    static func leaderKeepsHearing(_ c: ApplyOffTheLoopTests.HeldCluster, from follower: ReplicatedDataStore,
                                   since: ContinuousClock.Instant) async throws -> Bool {
        let config = c.leader.config
        let span = Duration.milliseconds(2 * config.electionTicks * config.tickMillis + 500)
        let id = follower.config.nodeID
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if c.nodes.contains(where: { $0.host.status.term != c.term }) { return false }
            if let heard = c.leader.host.lastHeard.withLock({ $0[id] }), heard >= since + span { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    @Test(.enabled(if: ReplicatedDataStoreTests.openssl != nil)) func aFollowerWhoseAppendWaitsBehindItsOwnApplyKeepsAnswering() async throws {
        let dir = TestDirectory.root + "ember-follower-persist-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let c = try await ApplyOffTheLoopTests.heldCluster(dir, holdOnLeader: false)
        let follower = c.followers[0]
        // Hold the follower's first apply queued on its own (not one riding in an append).
        let armed = DispatchSemaphore(value: 1)
        let (held, release) = (c.held, c.release)
        follower.host.store.core.afterQueuedApplyHandOut.withLock {
            $0 = {
                guard armed.wait(timeout: .now()) == .success else { return }
                held.signal()
                release.wait()
            }
        }
        defer { c.release.signal() }  // a failed expectation must not leave the writer held

        // Committed by the leader and the other follower; this follower learns the commit index
        // in a later message without new entries and applies it on its own: held there.
        #expect(try await ApplyOffTheLoopTests.write(c.leader, "a", .int(1)).value.applied)
        #expect(await ApplyOffTheLoopTests.wait(c.held, seconds: 60), "the follower's apply never reached the hold")
        // The leader's next entries reach the follower now (their append is queued behind the
        // held apply there), and a write through it is forwarded, waiting for its own apply.
        let later = [ApplyOffTheLoopTests.write(c.leader, "b", .int(2)), ApplyOffTheLoopTests.write(follower, "c", .int(3))]
        #expect(try await Self.leaderKeepsHearing(c, from: follower, since: .now),
                "the leader stopped hearing from a follower whose append waited behind its apply")
        #expect(c.nodes.allSatisfy { $0.host.status.term == c.term }, "an election began while the follower's apply was held")

        c.release.signal()
        for w in later { #expect(try await w.value.applied) }
        try await ApplyOffTheLoopTests.expectEverywhere(c, ["a": .int(1), "b": .int(2), "c": .int(3)])
    }
}
