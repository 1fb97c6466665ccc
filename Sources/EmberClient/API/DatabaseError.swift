import EmberCore
import Foundation

/// Errors reported by the client: server statuses (reference §6.3), invalid data and offline reads.
public struct DatabaseError: Error, Sendable, Equatable, CustomStringConvertible, LocalizedError {
    public enum Code: String, Sendable {
        case permissionDenied = "permission_denied"
        case dataStale = "datastale"
        case disconnected = "disconnect"
        case offline = "offline"
        case invalidData = "invalid_data"
        case writeCanceled = "write_canceled"
        case maxRetries = "maxretry"
        case unavailable = "unavailable"
        case other = "other"
    }

    public var code: Code
    /// The server's status string for `.other`.
    public var status: String
    public var message: String

    public init(code: Code, status: String? = nil, message: String) {
        self.code = code
        self.status = status ?? code.rawValue
        self.message = message
    }

    static func from(status: String, data: JSON) -> DatabaseError {
        let text = data.stringValue ?? ""
        let code = Code(rawValue: status) ?? .other
        switch code {
        case .permissionDenied: return DatabaseError(code: code, message: text.isEmpty ? "Permission denied" : text)
        case .offline: return DatabaseError(code: code, message: "Client is offline and the value is not cached.")
        case .disconnected: return DatabaseError(code: code, message: "The write was canceled because the connection was lost.")
        default: return DatabaseError(code: code, status: status, message: text.isEmpty ? status : text)
        }
    }

    /// Local validation failures (EmberCore errors) as `invalidData`.
    static func invalid(_ error: any Error) -> DatabaseError {
        if let e = error as? DatabaseError { return e }
        return DatabaseError(code: .invalidData, message: "\(error)")
    }

    public var description: String { "\(status.uppercased()): \(message)" }
    public var errorDescription: String? { description }
}
