import EmberNodeStore
import EmberRaft
import EmberStorage
import NIOCore

/// A member of 0.6.0 (peer level 3) stops on the first triggers `advance` entry it is given, and
/// one of 0.7.0 (level 4) on the first `updateText` entry (level 5): the same gate holds both. The
/// leader logs `settle` entries instead while such a member is connected (`membersSpeak(4)`), but
/// its log may still hold `advance` entries from before (a node downgraded after the upgrade,
/// its data directory wiped, or a 0.6.0 member added, replicates from index 1). So an append
/// holding one is never sent on a connection below level 4: the leader compacts Raft's log
/// through its applied index, past that entry, and Raft's own path for a follower behind the
/// log's start sends the member a snapshot (its index is at least the compaction point: an older
/// image is not used, `RaftNode.usableSnapshotSource`), then the entries after it.
extension RaftHost {
    /// Sends a Raft message; an append holding an `advance` entry needs peer level 4. Only
    /// appends to a peer not connected at level 4 or later are read (a down peer's are queued
    /// with that level, `PeerLink` drops them if it comes back at an older one).
    func sendRaft(_ message: EmberRaft.Message) {
        // Answered by the transport's handler while this loop was held in a write.
        if case .heartbeatResponse = message.payload, !stalledHeartbeats.shouldSend(to: message.to, term: message.term) { return }
        var level = 1
        if case .appendEntries(let append) = message.payload, !append.entries.isEmpty {
            let speaks = transport.connectedLevel(message.to)
            if let speaks, speaks >= 5 {
                // Not read: it goes only on a connection at level 5 (if the link reconnects at an
                // older level before it is written, it is dropped and Raft sends it again).
                level = 5
            } else if let held = append.entries.last(where: { $0.kind == .normal && EmberStorage.LogEntry.isUpdateText($0.data) }) {
                level = 5
                hold(held.index, from: message.to, speaks: speaks, kind: "an update as text", needs: 5)
            } else if let speaks, speaks >= 4 {
                level = 4
            } else if let held = append.entries.last(where: { $0.kind == .normal && EmberStorage.LogEntry.isTriggerAdvance($0.data) }) {
                level = 4
                hold(held.index, from: message.to, speaks: speaks, kind: "a triggers advance entry", needs: 4)
            }
        }
        if LatencyMarks.enabled, case .appendEntries(let a) = message.payload, let first = a.entries.first, node.membership.isLearner(message.to) {
            LatencyMarks.mark(.sentToLearner, first.index, a.entries.last!.index, peer: message.to)
        }
        // The same entries to several members (the voters of a turn, the learners of a flush):
        // encoded once; a learner's batch copied from the voters' encodings while it lies in them.
        var entries: ByteBuffer? = nil
        if case .appendEntries(let append) = message.payload, !append.entries.isEmpty {
            let membership = node.membership
            let toLearner = !membership.learners.isEmpty && membership.isLearner(message.to)
            entries = appendEncodings.bytes(for: append.entries, toLearner: toLearner, keep: !membership.learners.isEmpty)
        }
        transport.send(.raft(message), to: message.to, level: level, entries: entries)
    }

    /// An entry at `index` a member connected below level `needs` cannot read: the log is
    /// compacted past it (`compactPastHeldAdvance`), and Raft sends that member a snapshot.
    private func hold(_ index: UInt64, from peer: NodeID, speaks: Int?, kind: String, needs: Int) {
        guard speaks != nil && index > advanceHeld else { return }
        advanceHeld = index
        logger.info("entries holding \(kind) held back from a member below peer level \(needs); it gets a snapshot", metadata: [
            "peer": "\(peer)", "heldIndex": "\(index)", "level": "\(speaks ?? 0)"])
    }

    /// Compacts Raft's log through the applied index once it covers the held `advance` entry
    /// (until then the entry stays held and this runs again next turn). HostCore defers a
    /// compaction while an apply waits or an image is being written; Raft keeps the entries after
    /// a snapshot still streaming to a live follower: both only delay it.
    func compactPastHeldAdvance() {
        // The store's applied index, not Raft's: an apply may still run off the loop (RaftHost+Apply).
        let applied = compactionApplied
        guard advanceHeld > node.log.snapshotIndex, applied >= advanceHeld else { return }
        _ = core.handle(.compact(index: applied))
    }
}
