import EmberNodeStore
import EmberRaft

/// "You are not a member": how a node removed while it was down learns of it.
///
/// The leader stops replicating to a removed node once its removal commits, so a node that was
/// down then comes back with the old configuration and keeps (pre-)campaigning against peers that
/// refuse its connections, forever. Instead, a node that refuses a peer connection because the
/// certificate (signed by the cluster CA) names no member writes this back before closing:
/// its configuration index, commit index and voters. The refused node acts on it only when it
/// proves a committed configuration newer than its own that leaves it out (`RaftHost.heard`);
/// it then stops campaigning (`Event.removedFromCluster`), reports `role: "removed"` and refuses
/// writes. A notice about an uncommitted or older configuration is ignored (a later connection
/// attempt brings a newer one).
public struct NotMemberNotice: Sendable, Hashable {
    public var from: NodeID
    /// Index of the entry (or snapshot) that defined the sender's voter set.
    public var configIndex: UInt64
    /// The sender's commit index: `>= configIndex` proves that configuration committed.
    public var commitIndex: UInt64
    public var voters: [NodeID]

    public init(from: NodeID, configIndex: UInt64, commitIndex: UInt64, voters: [NodeID]) {
        self.from = from
        self.configIndex = configIndex
        self.commitIndex = commitIndex
        self.voters = voters
    }

    /// Whether it tells `node` (holding configuration `configIndex` with voters `own`) that a
    /// newer committed configuration removed it. A node not in its own voter set (still joining,
    /// or already knowing of its removal) has nothing to learn.
    public func removes(_ node: NodeID, configIndex own: UInt64, voters: Membership) -> Bool {
        voters.isMember(node) && configIndex > own && commitIndex >= configIndex
            && !self.voters.isEmpty && !self.voters.contains(node)
    }
}

extension RaftHost {
    /// What this node tells a peer whose connection it refuses (thread-safe: from the published
    /// status, read on the transport's event loop).
    func notMemberNotice() -> NotMemberNotice {
        let s = status
        return NotMemberNotice(from: s.id, configIndex: s.configIndex, commitIndex: s.commitIndex, voters: s.membership.voters)
    }

    /// A peer refused us with a notice (in the loop).
    func heard(_ notice: NotMemberNotice) {
        guard notice.removes(node.id, configIndex: node.configIndex, voters: node.membership) else {
            logger.debug("not-a-member notice ignored (not newer, not committed, or names us)", metadata: [
                "from": "\(notice.from)", "configIndex": "\(notice.configIndex)", "commitIndex": "\(notice.commitIndex)"])
            return
        }
        logger.warning("this node was removed from the cluster while it was away: it stops campaigning and refuses writes", metadata: [
            "learnedFrom": "\(notice.from)", "voters": "\(notice.voters)", "configIndex": "\(notice.configIndex)",
            "ownConfigIndex": "\(node.configIndex)"])
        step(.removedFromCluster(configIndex: notice.configIndex))
    }
}
