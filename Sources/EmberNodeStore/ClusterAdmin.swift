import EmberCore
import EmberRaft

/// An operator's request to change the cluster (`POST /.ember/members` (`"learner": true` for a
/// non-voting member), `POST /.ember/members/ID/promote|demote`, `DELETE /.ember/members/ID`,
/// `POST /.ember/leader/transfer`). Executed by the leader; a follower forwards it over the peer
/// channel.
public enum ClusterAdminOperation: Sendable, Hashable {
    case addMember(id: NodeID, peer: PeerAddress, url: String?)
    /// Removes a voter or a learner.
    case removeMember(id: NodeID)
    case transferLeadership(to: NodeID)
    /// Adds a learner: replicated to, serving reads and listeners, never voting.
    case addLearner(id: NodeID, peer: PeerAddress, url: String?)
    /// A caught-up learner becomes a voter; a voter becomes a learner.
    case promoteMember(id: NodeID)
    case demoteMember(id: NodeID)
}

/// The HTTP answer to an admin operation: a status and a JSON body (`{"error": ...}` on failure).
public struct ClusterAdminAnswer: Sendable, Equatable {
    public var status: Int
    public var body: JSON

    public init(status: Int, body: JSON) {
        self.status = status
        self.body = body
    }

    public static func error(_ status: Int, _ message: String) -> ClusterAdminAnswer {
        ClusterAdminAnswer(status: status, body: .object(["error": .string(message)]))
    }
}
