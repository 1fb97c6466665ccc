import EmberCore

/// A refused request: an HTTP status and Firebase's `{"error" : "..."}` text. Deterministic
/// failures are 4xx; clients (firebase-admin) retry 500/503, POST included.
public struct RestError: Error, Sendable, Equatable {
    public var status: Int
    public var message: String

    public init(_ status: Int, _ message: String) {
        self.status = status
        self.message = message
    }

    public static func badRequest(_ m: String) -> RestError { RestError(400, m) }

    public init(_ e: EmberError) {
        self.init(400, e.description)
    }

    /// Production pretty-prints errors with spaces around the colon.
    public var body: String {
        "{\n  \"error\" : \(JSON.string(message).serialized())\n}\n"
    }
}
