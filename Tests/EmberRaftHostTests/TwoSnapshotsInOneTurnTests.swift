// The crash the fault campaign found (RELIABILITY.md, fixed in 3cf76ab): a re-added, wiped
// follower got two one-chunk snapshots (4151, then 4157) in one batch of inputs. The host steps
// every input of a turn before performing the turn's actions, so Raft's log was already at the
// second snapshot when the first was installed; installing it asked Raft's log for the entries
// after 4151, which it no longer held (RaftLog's "range not in log" precondition stopped the
// node). These replay that turn through the host core: its plan must install the first with no
// tail and the second after it, and a store performing the plan ends at the second.

import EmberRaft
import EmberRaftHost
import Testing

@Suite struct TwoSnapshotsInOneTurnTests {
    @Test func twoSnapshotsRestoredInOneTurnInstallInOrder() {
        var core = followerCore()
        // Both arrive before the turn's plan is made (one inbox batch).
        _ = core.handle(.event(snapshotChunk(20, data: [2, 0])))
        _ = core.handle(.event(snapshotChunk(30, data: [3, 0])))
        #expect(core.node.log.snapshotIndex == 30)
        // Before the fix this planned the first install's tail from Raft's log (21...30, no
        // longer held) and trapped.
        let plan = core.handle(.endTurn(inputWaiting: false))
        let installs = plan.compactMap { if case .installSnapshot(let m, let tail) = $0 { (m.index, tail) } else { nil } }
        #expect(installs.map(\.0) == [20, 30])
        #expect(installs.allSatisfy { $0.1.isEmpty })
        // Each install follows its own staging: the store installs the bytes of its snapshot.
        var store = ModelStore()
        store.appliedIndex = 3
        var installedStates: [[UInt8]] = []
        for effect in plan {
            store.perform([effect])
            if case .installSnapshot = effect { installedStates.append(store.state) }
        }
        #expect(installedStates == [[2, 0], [3, 0]])
        #expect(store.appliedIndex == 30 && core.node.appliedIndex == 30 && core.node.commitIndex == 30)
        // Both snapshots are acknowledged, each after its install.
        let acks = plan.enumerated().compactMap { i, e -> (Int, UInt64)? in
            guard case .send(let m) = e, case .installSnapshotResponse(let index, _, true) = m.payload else { return nil }
            return (i, index)
        }
        #expect(acks.map(\.1) == [20, 30])
        let installAt = plan.indices.filter { if case .installSnapshot = plan[$0] { true } else { false } }
        #expect(zip(installAt, acks.map(\.0)).allSatisfy { $0 < $1 })
    }

    /// The ordinary case keeps its tail: entries that arrive after the snapshot in the same turn
    /// are stored after the install (installing empties the stored log).
    @Test func entriesAfterASnapshotInTheSameTurnAreTheInstallsTail() {
        var core = followerCore()
        _ = core.handle(.event(snapshotChunk(20, data: [2, 0])))
        _ = core.handle(.event(append(entries(21...22), prev: 20, commit: 20)))
        let plan = core.handle(.endTurn(inputWaiting: false))
        let installs = plan.compactMap { if case .installSnapshot(let m, let tail) = $0 { (m.index, tail) } else { nil } }
        #expect(installs.count == 1 && installs[0].0 == 20 && installs[0].1.map(\.index) == [21, 22])
        var store = ModelStore()
        store.appliedIndex = 3
        store.perform(plan)
        #expect(store.appliedIndex == 20 && store.log.keys.sorted() == [21, 22])
    }
}
