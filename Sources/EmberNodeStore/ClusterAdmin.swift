import EmberCore
import EmberRaft

/// An operator's request to change the cluster (`POST /.ember/members`, `DELETE
/// /.ember/members/ID`, `POST /.ember/leader/transfer`). Executed by the leader; a follower
/// forwards it over the peer channel.
public enum ClusterAdminOperation: Sendable, Hashable {
    case addMember(id: NodeID, peer: PeerAddress, url: String?)
    case removeMember(id: NodeID)
    case transferLeadership(to: NodeID)
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
