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
///
/// An unsigned token (`alg` "none" or an empty signature: what the SDKs' `mockUserToken` and
/// `@firebase/rules-unit-testing` build) never expires, as in the Firebase emulator: the SDK
/// sets `iat` to 0 unless told otherwise, so its `exp` is in 1970, and refusing it would make
/// the SDK reconnect forever. A token that carries a signature keeps its expiry (the node
/// cannot check the signature here, but a real token's lifetime is still honoured).
public struct EmulatorTokenVerifier: TokenVerifier {
    public init() {}

    public func identity(for token: String, address: String?, now: Int64) throws(AuthError) -> Identity {
        if token == "owner" { return .admin }
        guard let claims = JWTClaims.decodeUnverified(token) else {
            throw AuthError(.invalid, "Could not parse auth token.")
        }
        let id = Identity.user(claims: claims, now: now)
        guard case .user(let c, let exp?) = id else { return id }
        // No expiry at all: the session's expiry timer must not revoke it either.
        if JWTClaims.isUnsigned(token) { return .user(claims: c, expiresAt: nil) }
        if exp <= now { throw AuthError(.expired, "Auth token is expired.") }
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

    /// An unsecured JWT (RFC 7519 §6): its header's `alg` is "none" (any case), or it has no
    /// signature. A header that cannot be read counts as signed (the stricter reading).
    public static func isUnsigned(_ token: String) -> Bool {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return false }
        if parts[2].isEmpty { return true }
        guard parts[0].utf8.count <= maxClaimsBytes, let bytes = base64URLDecode(parts[0]),
              case .object(let header)? = try? JSON.parse(bytes) else { return false }
        return header["alg"]?.stringValue?.lowercased() == "none"
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

