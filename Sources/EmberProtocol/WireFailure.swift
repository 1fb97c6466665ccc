import EmberCore

/// Why a wire request failed, as the protocol tells the client: each kind has its response
/// status (reference §6.3). The server sorts its errors into these kinds (`WireMessages.failure`);
/// the statuses themselves are the protocol's.
public enum WireFailure: Sendable, Equatable, Error {
    /// Bad input (a path, a query, a value, a write the store refused as invalid).
    case invalidData(String)
    /// Over a rate or a per-connection limit.
    case tooManyRequests(String)
    /// The node cannot serve it now (no quorum, a store that keeps no onDisconnect, ...).
    case unavailable(String)
    /// Refused by the rules.
    case permissionDenied(String)
    /// The node's disk is full.
    case insufficientStorage(String)
    case internalError(String)

    public var status: String {
        switch self {
        case .invalidData: "invalid_data"
        case .tooManyRequests: "too_many_requests"
        case .unavailable: "unavailable"
        case .permissionDenied: "permission_denied"
        case .insufficientStorage: "insufficient_storage"
        case .internalError: "internal_error"
        }
    }

    public var message: String {
        switch self {
        case .invalidData(let m), .tooManyRequests(let m), .unavailable(let m), .permissionDenied(let m),
             .insufficientStorage(let m), .internalError(let m): m
        }
    }

    /// The response to request `r` that failed this way.
    public func response(_ r: Int64) -> WireServerMessage {
        .response(r: r, status: status, data: .string(message))
    }
}
