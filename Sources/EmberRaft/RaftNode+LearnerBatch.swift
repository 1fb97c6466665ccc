// A learner's committed entries, held for a bigger batch (issue 38). At a low write rate a
// leader sent each commit to each learner at once: every commit woke every learner for a
// receive, a decode, an apply and a transaction (~0.25 ms of CPU each on a busy 2-core machine),
// right while the next write's quorum round trip ran on the same cores. Fewer than
// `RaftConfig.learnerBatchMinEntries` pending entries now wait for more, for the host's
// `Event.flushLearners` (a timer of a few milliseconds: a learner's listeners hear of a write
// that much later at most) or for the leader's tick. Under load each append is bigger than the
// minimum and goes as before; a learner probed or being sent a snapshot is never held.

extension RaftNode {
    /// Whether the leader holds committed entries back from some learner: a host arms its
    /// flush timer (`Event.flushLearners`) while this is true after a turn.
    public var learnerSendsHeld: Bool { !learnersHeld.isEmpty }

    /// Whether the entries through `end` pending for learner `peer` are held (and it is marked
    /// held): a learner in steady replication sent everything before them, with fewer pending
    /// than the minimum, outside a flush.
    mutating func holdsForBatch(_ peer: NodeID, _ pr: PeerProgress, end: UInt64) -> Bool {
        guard config.learnerBatchMinEntries > 0, !flushingLearners, pr.state == .replicate,
              membership.isLearner(peer), end >= pr.nextIndex,
              end - pr.nextIndex + 1 < UInt64(config.learnerBatchMinEntries)
        else { return false }
        learnersHeld.insert(peer)
        return true
    }

    /// Sends every held learner what it is missing (`Event.flushLearners`, the leader's tick).
    mutating func flushHeldLearners() {
        guard role == .leader, !learnersHeld.isEmpty else {
            learnersHeld = []
            return
        }
        let held = learnersHeld.sorted()  // a set's order is per process: keep steps deterministic
        learnersHeld = []
        flushingLearners = true
        defer { flushingLearners = false }
        for peer in held where membership.isLearner(peer) && progress[peer] != nil {
            replicate(to: peer, sendIfEmpty: false)
        }
    }
}
