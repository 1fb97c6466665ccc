import EmberCore
import EmberStorage
import Foundation

/// Who makes a request, as rules see it. Resolved once per REST request and once per wire
/// `auth`/`gauth`, by the node's `TokenVerifier`.
public enum Identity: Sendable, Equatable {
    /// Bypasses rules: `Bearer owner` where trusted, the admin token, an admin client certificate.
    case admin
    /// A token's claims (`auth` in rules; `uid` is taken from `sub` when absent). `expiresAt` is
    /// the token's `exp` in milliseconds since the epoch, when it has one.
    case user(claims: JSON, expiresAt: Int64?)
    /// No token: `auth == null` in rules.
    case anonymous

    /// The `auth` variable rules see: nil for anonymous, the claims for a user. Admins bypass rules,
    /// so their value only matters for `auth_variable_override`, which replaces the identity.
    public var authVariable: JSON? {
        switch self {
        case .admin, .anonymous: return nil
        case .user(let claims, _): return claims
        }
    }

    public var isAdmin: Bool { self == .admin }

    /// An identity for the claims object of a token: `uid` mirrors `sub` as Firebase does.
    public static func user(claims: JSON, now: Int64) -> Identity {
        guard case .object(var obj) = claims else { return .anonymous }
        if obj["uid"] == nil, let sub = obj["sub"] { obj["uid"] = sub }
        var expiresAt: Int64?
        if let exp = obj["exp"]?.numberValue { expiresAt = Int64(exp * 1000) }
        return .user(claims: .object(obj), expiresAt: expiresAt)
    }
}

/// Why a token was refused. REST answers 401 with `message`; the wire answers `invalid_token`
/// (or `expired_token`) with it.
public struct AuthError: Error, Sendable, Equatable {
    public enum Reason: String, Sendable { case invalid, expired, untrustedOwner }
    public var reason: Reason
    public var message: String
    public init(_ reason: Reason, _ message: String) {
        self.reason = reason
        self.message = message
    }
}

/// Maps a presented credential to an identity. `address` is the client's IP address (for
/// `--trust-owner-from`), `now` milliseconds since the epoch.
public protocol TokenVerifier: Sendable {
    func identity(for token: String, address: String?, now: Int64) throws(AuthError) -> Identity
}

/// Protected mode (loopback only, no keys configured): the emulator's conveniences. `owner` is
/// admin; any JWT-shaped token is accepted for its claims without a signature check.
public struct EmulatorTokenVerifier: TokenVerifier {
    public init() {}

    public func identity(for token: String, address: String?, now: Int64) throws(AuthError) -> Identity {
        if token == "owner" { return .admin }
        guard let claims = JWTClaims.decodeUnverified(token) else {
            throw AuthError(.invalid, "Could not parse auth token.")
        }
        let id = Identity.user(claims: claims, now: now)
        if case .user(_, let exp?) = id, exp <= now { throw AuthError(.expired, "Auth token is expired.") }
        return id
    }
}

/// Reads the claims of a JWT without checking its signature (protected mode only).
public enum JWTClaims {
    /// Claims larger than this are refused: a token is a header, not a payload.
    public static let maxClaimsBytes = 16_384

    public static func decodeUnverified(_ token: String) -> JSON? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[1].utf8.count <= maxClaimsBytes else { return nil }
        guard let bytes = base64URLDecode(parts[1]), let claims = try? JSON.parse(bytes), case .object = claims else { return nil }
        return claims
    }

    /// Unpadded base64url (RFC 7515 §2), as JWT segments are written.
    public static func base64URLDecode(_ text: Substring) -> [UInt8]? {
        var b64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while b64.utf8.count % 4 != 0 { b64 += "=" }
        return Data(base64Encoded: b64).map { Array($0) }
    }
}

extension Identity {
    /// How a log entry carries this identity (anonymous is `auth == null`).
    public var writeAuth: WriteAuth {
        switch self {
        case .admin: return .admin
        case .user(let claims, _): return .user(claims)
        case .anonymous: return .user(nil)
        }
    }
}

