import EmberCore
import Foundation
import Testing
@testable import EmberNodeStore
@testable import EmberServer

/// Protected mode's tokens (issue 40): the SDKs' unsigned mock tokens never expire, as in the
/// Firebase emulator; a token that carries a signature keeps its expiry; verified mode still
/// refuses unsigned tokens outright.
@Suite struct EmulatorTokenVerifierTests {
    let now: Int64 = 1_790_000_000_000
    let v = EmulatorTokenVerifier()

    /// What `createMockUserToken({sub: "alice"})` in the JS SDK sends: header
    /// `{"alg":"none","type":"JWT"}`, `iat` 0 so `exp` 3600 (January 1970), empty signature.
    static func sdkMockToken(sub: String = "alice", iat: Int64 = 0) -> String {
        let header = JSON.object(["alg": .string("none"), "type": .string("JWT")])
        let claims = JSON.object([
            "iss": .string("https://securetoken.google.com/demo-project"), "aud": .string("demo-project"),
            "iat": .int(iat), "exp": .int(iat + 3600), "auth_time": .int(iat), "sub": .string(sub),
            "user_id": .string(sub),
            "firebase": .object(["sign_in_provider": .string("custom"), "identities": .object([:])]),
        ])
        return TokenMint.b64url(Array(header.serialized().utf8)) + "." + TokenMint.b64url(Array(claims.serialized().utf8)) + "."
    }

    @Test func theSDKsMockTokenFrom1970IsAUserWithoutExpiry() throws {
        let id = try v.identity(for: Self.sdkMockToken(), address: "127.0.0.1", now: now)
        guard case .user(let claims, let expiresAt) = id else { Issue.record("not a user: \(id)"); return }
        #expect(expiresAt == nil, "no expiry: the session's timer must not revoke it")
        #expect(claims["uid"] == .string("alice") && claims["sub"] == .string("alice"))
        // Rules still see the claims as sent.
        #expect(claims["exp"] == .int(3600) && claims["iat"] == .int(0))
    }

    @Test func everyUnsignedShapeSkipsTheExpiryCheck() throws {
        let past = TokenMint.claims(now: now, exp: -7200)
        for header: JSON in [.object(["alg": .string("none")]), .object(["alg": .string("NONE"), "typ": .string("JWT")]),
                             .object(["alg": .string("HS256")])] {  // HS256 without a signature is unsigned too
            let t = try TokenMint.token(header: header, claims: past, sign: nil)
            #expect(JWTClaims.isUnsigned(t))
            let id = try v.identity(for: t, address: nil, now: now)
            #expect(id == .user(claims: Identity.user(claims: past, now: now).authVariable!, expiresAt: nil))
        }
        // alg none with something in the signature slot: still unsigned by its header.
        let noneWithJunk = try TokenMint.token(header: .object(["alg": .string("none")]), claims: past) { _ in [1, 2, 3] }
        #expect(JWTClaims.isUnsigned(noneWithJunk))
        #expect(throws: Never.self) { try v.identity(for: noneWithJunk, address: nil, now: now) }
    }

    @Test func aSignedTokenKeepsItsExpiry() async throws {
        // The signature is not checked in protected mode, but its lifetime is honoured.
        let expired = try await TokenMint.hs256(TokenMint.claims(now: now, exp: -1))
        #expect(!JWTClaims.isUnsigned(expired))
        #expect(throws: AuthError(.expired, "Auth token is expired.")) { try v.identity(for: expired, address: nil, now: now) }
        let live = try await TokenMint.hs256(TokenMint.claims(now: now, exp: 600))
        guard case .user(_, let expiresAt) = try v.identity(for: live, address: nil, now: now) else {
            Issue.record("not a user"); return
        }
        #expect(expiresAt == (now / 1000 + 600) * 1000)
        // An unreadable header counts as signed: the expiry applies.
        let parts = TokenMint.claims(now: now, exp: -1).serialized()
        let odd = "%%%." + TokenMint.b64url(Array(parts.utf8)) + ".c2ln"
        #expect(!JWTClaims.isUnsigned(odd))
        #expect(throws: AuthError(.expired, "Auth token is expired.")) { try v.identity(for: odd, address: nil, now: now) }
    }

    @Test func ownerAndGarbageAreUnchanged() throws {
        #expect(try v.identity(for: "owner", address: nil, now: now) == .admin)
        #expect(throws: AuthError(.invalid, "Could not parse auth token.")) { try v.identity(for: "a.b", address: nil, now: now) }
        #expect(throws: AuthError(.invalid, "Could not parse auth token.")) { try v.identity(for: "..", address: nil, now: now) }
        #expect(!JWTClaims.isUnsigned("a.b") && !JWTClaims.isUnsigned("x"))
    }

    @Test func verifiedModeStillRefusesTheMockToken() async throws {
        var s = JWTTokenVerifier.Settings()
        s.hmacSecrets = [TokenMint.secret]
        let verified = try await JWTTokenVerifier.make(s)
        #expect(throws: AuthError(.invalid, "Unsigned auth tokens are not accepted.")) {
            try verified.identity(for: Self.sdkMockToken(iat: now / 1000), address: "127.0.0.1", now: now)
        }
    }
}
