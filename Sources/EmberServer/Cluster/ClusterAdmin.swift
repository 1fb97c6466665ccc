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

    static func error(_ status: Int, _ message: String) -> ClusterAdminAnswer {
        ClusterAdminAnswer(status: status, body: .object(["error": .string(message)]))
    }
}

/// An admin operation waiting in the Raft driver, and who gets the answer.
struct PendingAdmin: Sendable {
    enum Origin: Sendable {
        /// An HTTP request on this node.
        case local(CheckedContinuation<ClusterAdminAnswer, Never>)
        /// A follower forwarded it: answer with an `adminReply` frame.
        case remote(NodeID, requestID: UInt64)
    }

    var operation: ClusterAdminOperation
    var origin: Origin
    var deadline: ContinuousClock.Instant
    /// Set when first refused as "change pending": retried on ticks until then (a new leader
    /// must commit an entry of its term before a change, which takes one round trip).
    var retryUntil: ContinuousClock.Instant? = nil
}

/// A follower hands an admin operation to the leader. `origin` is the node waiting for the
/// answer under `requestID`: the sender, or the node that forwarded it to the sender (a leader
/// that hands leadership over before removing itself passes the request on).
public struct AdminForward: Sendable, Hashable {
    public var from: NodeID
    public var origin: NodeID
    public var requestID: UInt64
    public var operation: ClusterAdminOperation

    public init(from: NodeID, origin: NodeID, requestID: UInt64, operation: ClusterAdminOperation) {
        self.from = from
        self.origin = origin
        self.requestID = requestID
        self.operation = operation
    }
}

/// The leader's answer to an `AdminForward`: the HTTP status and the body's JSON text.
public struct AdminReply: Sendable, Hashable {
    public var from: NodeID
    public var requestID: UInt64
    public var status: Int
    public var body: String

    public init(from: NodeID, requestID: UInt64, status: Int, body: String) {
        self.from = from
        self.requestID = requestID
        self.status = status
        self.body = body
    }
}
