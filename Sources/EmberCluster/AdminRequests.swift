import EmberCore
import EmberNodeStore
import EmberRaft

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
