import EmberCore
import Foundation
import JWTKit

/// Verifies signed JWTs (HS256 with shared secrets, RS256/ES256 with the public keys of a JWKS)
/// for a node with auth configured. jwt-kit does the cryptography and key parsing; the checks run
/// synchronously here because every request resolves its identity on its own task.
///
/// `owner` (what firebase-admin sends to a self-hosted server) is admin only from a trusted
/// address; an `--admin-token-file` token is admin from anywhere; unsigned tokens are refused.
public struct JWTTokenVerifier: TokenVerifier {
    public struct Settings: Sendable {
        /// HS256 shared secrets (several while rotating).
        public var hmacSecrets: [String] = []
        /// A JWKS document (`{"keys": [...]}`) with RS256/ES256 public keys.
        public var jwksJSON: String?
        /// Required `iss`, when set.
        public var issuer: String?
        /// Required `aud` (or one of its entries), when set.
        public var audience: String?
        /// Tokens that are admin from any address.
        public var adminTokens: [String] = []
        /// Client addresses from which `owner` is admin.
        public var trustOwnerFrom: [CIDR] = []
        /// Tolerated clock difference with the issuer, for `nbf` and `iat`.
        public var clockSkewSeconds: Int64 = 60
        public init() {}

        public var hasKeys: Bool { !hmacSecrets.isEmpty || jwksJSON != nil }
    }

    /// A secret shorter than this is refused at startup (RFC 7518 §3.2: at least the hash size).
    public static let minSecretBytes = 32
    /// An admin token shorter than this is refused at startup: it would be guessable.
    public static let minAdminTokenBytes = 16
    /// Tokens longer than this are refused before any decoding.
    public static let maxTokenBytes = 16_384
    /// Algorithms accepted from JWKS keys (HS256 comes from the secrets).
    static let asymmetricAlgorithms: Set<String> = ["RS256", "RS384", "RS512", "ES256", "ES384", "ES512"]

    struct Key: Sendable {
        let kid: String?
        let algorithm: any JWTAlgorithm
        var name: String { algorithm.name }
    }

    let keys: [Key]
    let settings: Settings

    /// Builds the key table (jwt-kit's key collection is an actor, so this is async; checks are not).
    public static func make(_ settings: Settings) async throws -> JWTTokenVerifier {
        var keys: [Key] = []
        for secret in settings.hmacSecrets {
            guard secret.utf8.count >= minSecretBytes else {
                throw AuthSetupError("an HS256 secret must be at least \(minSecretBytes) bytes")
            }
            let collection = await JWTKeyCollection().add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
            keys.append(Key(kid: nil, algorithm: try await collection.getKey()))
        }
        if let text = settings.jwksJSON {
            let jwks: JWKS
            do { jwks = try JSONDecoder().decode(JWKS.self, from: Data(text.utf8)) } catch {
                throw AuthSetupError("the JWKS file is not a JSON Web Key Set: \(error)")
            }
            for jwk in jwks.keys {
                guard let alg = jwk.algorithm?.rawValue ?? defaultAlgorithm(for: jwk), asymmetricAlgorithms.contains(alg) else {
                    throw AuthSetupError("JWKS key \(jwk.keyIdentifier?.string ?? "(no kid)"): only RS256/384/512 and ES256/384/512 keys are supported")
                }
                guard jwk.privateExponent == nil else {
                    throw AuthSetupError("JWKS key \(jwk.keyIdentifier?.string ?? "(no kid)") holds a private key; give the node public keys only")
                }
                do {
                    let collection = try await JWTKeyCollection().add(jwk: jwk, isDefault: true)
                    keys.append(Key(kid: jwk.keyIdentifier?.string, algorithm: try await collection.getKey(alg: alg)))
                } catch {
                    throw AuthSetupError("JWKS key \(jwk.keyIdentifier?.string ?? "(no kid)"): \(error)")
                }
            }
        }
        guard !keys.isEmpty || !settings.adminTokens.isEmpty || !settings.trustOwnerFrom.isEmpty else { throw AuthSetupError("no keys, admin tokens or trusted owner addresses configured") }
        for t in settings.adminTokens where t.utf8.count < minAdminTokenBytes {
            throw AuthSetupError("an admin token must be at least \(minAdminTokenBytes) bytes")
        }
        return JWTTokenVerifier(keys: keys, settings: settings)
    }

    /// What the node logs at startup (no secrets).
    public var summary: String {
        let names = keys.map { k in k.kid.map { "\(k.name) kid=\($0)" } ?? k.name }
        return "keys [\(names.joined(separator: ", "))], admin tokens \(settings.adminTokens.count), "
            + "issuer \(settings.issuer ?? "any"), audience \(settings.audience ?? "any"), "
            + "owner trusted from [\(settings.trustOwnerFrom.map(\.description).joined(separator: ", "))]"
    }

    static func defaultAlgorithm(for jwk: JWK) -> String? {
        if jwk.keyType == .rsa { return "RS256" }
        if jwk.keyType == .ecdsa {
            switch jwk.curve?.rawValue {
            case "P-256": return "ES256"
            case "P-384": return "ES384"
            case "P-521": return "ES512"
            default: return nil
            }
        }
        return nil
    }

    public func identity(for token: String, address: String?, now: Int64) throws(AuthError) -> Identity {
        guard token.utf8.count <= Self.maxTokenBytes else { throw AuthError(.invalid, "Could not parse auth token.") }
        if settings.adminTokens.contains(where: { Self.constantTimeEqual($0, token) }) { return .admin }
        if token == "owner" {
            guard let address, settings.trustOwnerFrom.contains(where: { $0.contains(address) }) else {
                throw AuthError(.untrustedOwner, "The owner credential is only accepted from trusted addresses (--trust-owner-from).")
            }
            return .admin
        }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = JWTClaims.base64URLDecode(parts[0]),
              case .object(let header)? = try? JSON.parse(headerBytes),
              let alg = header["alg"]?.stringValue else {
            throw AuthError(.invalid, "Could not parse auth token.")
        }
        guard alg.lowercased() != "none", !parts[2].isEmpty else {
            throw AuthError(.invalid, "Unsigned auth tokens are not accepted.")
        }
        let kid = header["kid"]?.stringValue
        // A token naming a key id must match that key; secrets have no id and match any token.
        let candidates = keys.filter { $0.name == alg && ($0.kid == nil || kid == nil || $0.kid == kid) }
        guard !candidates.isEmpty else {
            throw AuthError(.invalid, "Invalid auth token: no key for algorithm \(alg)\(kid.map { " and kid \($0)" } ?? "").")
        }
        guard let signature = JWTClaims.base64URLDecode(parts[2]) else { throw AuthError(.invalid, "Could not parse auth token.") }
        let signed = Array((parts[0] + "." + parts[1]).utf8)
        guard candidates.contains(where: { (try? $0.algorithm.verify(signature, signs: signed)) == true }) else {
            throw AuthError(.invalid, "Invalid auth token signature.")
        }
        guard let claims = JWTClaims.decodeUnverified(token), case .object(let c) = claims else {
            throw AuthError(.invalid, "Could not parse auth token.")
        }
        try checkClaims(c, now: now)
        return Identity.user(claims: claims, now: now)
    }

    func checkClaims(_ c: KeyMap<JSON>, now: Int64) throws(AuthError) {
        let skewMs = settings.clockSkewSeconds * 1000
        func seconds(_ name: String) throws(AuthError) -> Int64? {
            guard let v = c[name] else { return nil }
            guard let n = v.numberValue, n.isFinite, abs(n) < 1e12 else {
                throw AuthError(.invalid, "Invalid auth token: claim \(name) is not a number.")
            }
            return Int64(n * 1000)
        }
        if let exp = try seconds("exp"), exp <= now { throw AuthError(.expired, "Auth token is expired.") }
        if let nbf = try seconds("nbf"), nbf > now + skewMs { throw AuthError(.invalid, "Auth token is not valid yet (nbf).") }
        if let iat = try seconds("iat"), iat > now + skewMs { throw AuthError(.invalid, "Auth token was issued in the future (iat).") }
        if let want = settings.issuer, c["iss"]?.stringValue != want {
            throw AuthError(.invalid, "Invalid auth token: issuer is not \(want).")
        }
        if let want = settings.audience {
            let ok: Bool
            switch c["aud"] {
            case .string(let s)?: ok = s == want
            case .array(let a)?: ok = a.contains(.string(want))
            default: ok = false
            }
            guard ok else { throw AuthError(.invalid, "Invalid auth token: audience is not \(want).") }
        }
    }

    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var diff: UInt8 = 0
        for i in x.indices { diff |= x[i] ^ y[i] }
        return diff == 0
    }
}

/// A node cannot start with this auth configuration; the message is the one-line reason.
public struct AuthSetupError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
