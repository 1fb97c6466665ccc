import EmberCore
import HTTPTypes
import Hummingbird
import NIOCore

/// Where the entry points find a client's credential and address; judging them is the
/// `TokenVerifier`'s job (`NodeConfiguration.identity(token:address:now:)`).
public enum ClientCredentials {
    /// A REST/SSE request's token: `auth=` / `access_token=` (already in `RestRequest.authToken`),
    /// else `Authorization: Bearer <token>` (firebase-admin sends `Bearer owner`).
    public static func token(query: String?, headers: HTTPFields) -> String? {
        if let query, !query.isEmpty { return query }
        guard let value = headers[.authorization] else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : token
    }

    /// The client's IP address as text (`127.0.0.1`, `::1`), for `--trust-owner-from` and the
    /// per-address connection limit; nil for a channel without one (tests, Unix sockets).
    public static func address(of channel: (any Channel)?) -> String? {
        channel?.remoteAddress?.ipAddress
    }
}

extension NodeConfiguration {
    /// The identity of a presented credential; no credential is anonymous.
    public func identity(token: String?, address: String?, now: Int64) throws(AuthError) -> Identity {
        guard let token else { return .anonymous }
        return try tokenVerifier.identity(for: token, address: address, now: now)
    }
}

extension AuthError {
    /// REST answer for a refused credential (production: 401 with the reason).
    public var restError: RestError { RestError(401, message) }
    /// Wire status for a refused credential.
    public var wireStatus: String { reason == .expired ? "expired_token" : "invalid_token" }
}
