/// How the store says no; the fronts turn these into their statuses (REST: 503, 401, 400/403).

/// The store cannot take writes right now (e.g. its queue is full); clients may retry.
public struct StoreUnavailable: Error, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
}

/// The security rules refused the operation.
public struct PermissionDenied: Error, Sendable {
    public init() {}
    public static let message = "Permission denied"
}

/// A request the store refuses for good: bad input (`badRequest`, 400) or a forbidden target
/// (403). Retrying the same request will not help.
public struct StoreRefusal: Error, Sendable, Equatable {
    public var status: Int
    public var message: String

    public init(status: Int, message: String) {
        self.status = status
        self.message = message
    }

    public static func badRequest(_ message: String) -> StoreRefusal { StoreRefusal(status: 400, message: message) }
    public static func forbidden(_ message: String) -> StoreRefusal { StoreRefusal(status: 403, message: message) }
    /// The node has no room for the write (the NOSPACE alarm; REST 507, wire `insufficient_storage`).
    /// Not applied; the same write succeeds once space is freed.
    public static func noSpace(_ message: String) -> StoreRefusal { StoreRefusal(status: 507, message: "NOSPACE: \(message)") }
}
