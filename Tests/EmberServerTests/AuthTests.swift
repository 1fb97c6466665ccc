import EmberCore
import Foundation
import JWTKit
import Testing
@testable import EmberCluster
@testable import EmberNodeStore
@testable import EmberServer

/// Mints tokens the way an issuer does: jwt-kit signs, the verifier under test checks.
struct TokenMint {
    static let secret = "0123456789abcdef0123456789abcdef-hs256"
    // A throwaway 2048-bit key for tests only.
    static let rsaPEM = """
-----BEGIN PRIVATE KEY-----
MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC3eVPP01+5naIb
TKiwCJ3JmjmgrCylltc+mQ59UIpx3EpQo6BORHXPwBUkg4Y6mYgfSOetwc6eGbUh
OZmiAdtnwaPTdUFkRHlGZWjkKFxDUd0Igaa55Mre8zpmGR6tENLyjgG43074HAn6
iLZ8uyoYqmfv2qLn9gJXZea8bqhOnRjSXVm3yEcjuOFvQvHP/zWV0CeiTm3WCqHk
xY92DRHhyQ8KZE4PMTbujggQNaAEqoLKtFBd8vOr+v082xqTPPWZx6WVR3Qk4OLX
blyp0cVc8L98+VehGFXmrjdf/Tmo7nCE3AkvjNLsCTtOn0S2vu2YgIOYfP8RUp8d
UN0ifECnAgMBAAECggEATlApz5QcEGjx6DAk8pqC6yn6vhOvrPCBKJWBI0ktBuOu
DtSA2NeM5+PHwoGnWjztZtkiFr8aV86GS0vAQXAEfDmhmWE7y7YUg9FGX9jAZPW8
4GQiy8cWNurf+vNu7hU3zVOC9avPk8S4F6miJwRmuAeIfM84aMVPg4mZ3sVm7sKR
S/0neswc28u1IrqG7AwP4Hw4ZGpX9wFJDUJG9sLyHaizBWK+00++hSsARtwx3ozK
s+d0G6S6nJZeCd1Dqjsyes7jY5BlKVq9/f+VUp1/cUBAeBSqo4Y4sdAHJ/1MeRI7
irpTds6M9RXXBUrCu0AUOqq+//HvtTDCzfyDZYitQQKBgQD8WtzcBYncbxLublOg
rIo2cHGQpulUF4UxSG1PdwPpp4r/TKE7O+pKSukRLnqGLNmevdtfT6azdyEXx9HJ
kxQrM8yAPXaZaQkxE0gXr0Ocv9p3MfRyXGbgbrmvsalQkXECN2qdyBCreWGckHg1
yNxJcH44i+4JViSGw9UoC8Ff5wKBgQC6H8MecXDp2Tnrtw2aPqahcEYWc8fu+K5y
g4qFlYKsEDYQ5MESbmdfZBPnd6DgC1xFTTQ8sAxAfLyNApy4OtOPg0toT0i1tYGJ
8PDfOcs/w8Jz1TqLWljTDA+zfmNRQ8IwlJjpQmAchjfOTVD8XFdfpVD8TGnq75BK
e98pnoUBQQKBgGKxqpUGOX+TlUTYsy4wrLFT0qZvEOwJctbua4nbkxUrqGnmb1w6
N4wstfA5TEPzgHzb5dLl1N11ZuTlCkAanJW04XL6Fssy0Bx4XQaeTgQc6HUbfW3I
g5ec1lRHWF+hMiBaygDBQPu/MhTIT6tBTh4Ot96no0XVgd2O82uBBXTbAoGAdkHI
D4e0XmCO1J2yHta/uMNFRO67kbKf5FJ/qPCd3gVO1N0Db1qGg61qmB8CMFgHgGDV
V9njbvXSNyX5vXRjB0Q8nUICyLFSZPqZkLt/0DvpSP+p+vCkjzOSplEfeXq733IK
1eo+duEwg/vMAQwK19KJ6kQC6CreWvTpjeASUgECgYEAsBUkH7CKhwIPU+sG3QI3
0VCFu3KfBabZkDDcnzKidRixdJWqcebMqf45fVE8nTF1G53C7eoFwWi/rjWc6le+
Jd2ynvrk2arlLSiJkjOLJ9PWCoIRjnDILICu3X70JaduJbXPl3zjXz138S5o80gU
i4rRtccfDNzq20v30i5LWU0=
-----END PRIVATE KEY-----
"""

    static func b64url(_ bytes: some DataProtocol) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }


    static func token(header: JSON, claims: JSON, sign: (([UInt8]) throws -> [UInt8])?) throws -> String {
        let input = b64url(Array(header.serialized().utf8)) + "." + b64url(Array(claims.serialized().utf8))
        guard let sign else { return input + "." }
        return input + "." + b64url(try sign(Array(input.utf8)))
    }

    static func hs256(_ claims: JSON, secret: String = secret) async throws -> String {
        let key = try await JWTKeyCollection().add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256).getKey()
        return try token(header: .object(["alg": .string("HS256"), "typ": .string("JWT")]), claims: claims) { try key.sign($0) }
    }

    static func claims(sub: String = "alice", now: Int64, exp: Int64? = 3600, extra: KeyMap<JSON> = [:]) -> JSON {
        var c: KeyMap<JSON> = ["sub": .string(sub), "iat": .int(now / 1000)]
        if let exp { c["exp"] = .int(now / 1000 + exp) }
        for (k, v) in extra { c[k] = v }
        return .object(c)
    }
}

@Suite struct JWTTokenVerifierTests {
    let now: Int64 = 1_790_000_000_000

    func hsVerifier(_ edit: (inout JWTTokenVerifier.Settings) -> Void = { _ in }) async throws -> JWTTokenVerifier {
        var s = JWTTokenVerifier.Settings()
        s.hmacSecrets = [TokenMint.secret]
        edit(&s)
        return try await JWTTokenVerifier.make(s)
    }

    func reason(_ v: some TokenVerifier, _ token: String, address: String? = "203.0.113.9") -> AuthError? {
        do { _ = try v.identity(for: token, address: address, now: now); return nil } catch { return error }
    }

    @Test func validHS256BecomesAUserWithUidAndExpiry() async throws {
        let v = try await hsVerifier()
        let t = try await TokenMint.hs256(TokenMint.claims(now: now, extra: ["admin": .bool(true)]))
        let id = try v.identity(for: t, address: nil, now: now)
        guard case .user(let claims, let exp) = id else { Issue.record("not a user: \(id)"); return }
        #expect(claims["uid"] == .string("alice") && claims["admin"] == .bool(true))
        #expect(exp == (now / 1000 + 3600) * 1000)
    }

    @Test func expiredNotYetValidFutureIatAndWrongKeyAreRefused() async throws {
        let v = try await hsVerifier()
        let expired = try await TokenMint.hs256(TokenMint.claims(now: now, exp: -1))
        #expect(reason(v, expired) == AuthError(.expired, "Auth token is expired."))
        let nbf = try await TokenMint.hs256(TokenMint.claims(now: now, extra: ["nbf": .int(now / 1000 + 600)]))
        #expect(reason(v, nbf)?.message == "Auth token is not valid yet (nbf).")
        // Within the clock skew is fine.
        let nbfSoon = try await TokenMint.hs256(TokenMint.claims(now: now, extra: ["nbf": .int(now / 1000 + 30)]))
        #expect(reason(v, nbfSoon) == nil)
        let iat = try await TokenMint.hs256(TokenMint.claims(now: now, extra: ["iat": .int(now / 1000 + 600)]))
        #expect(reason(v, iat)?.message == "Auth token was issued in the future (iat).")
        let wrongKey = try await TokenMint.hs256(TokenMint.claims(now: now), secret: String(repeating: "x", count: 40))
        #expect(reason(v, wrongKey) == AuthError(.invalid, "Invalid auth token signature."))
        var tampered = Array(try await TokenMint.hs256(TokenMint.claims(now: now)).split(separator: "."))
        tampered[1] = Substring(TokenMint.b64url(Array(TokenMint.claims(sub: "mallory", now: now).serialized().utf8)))
        #expect(reason(v, tampered.joined(separator: "."))?.message == "Invalid auth token signature.")
    }

    @Test func unsignedGarbageAndEmptyTokensAreRefused() async throws {
        let v = try await hsVerifier()
        let none = try TokenMint.token(header: .object(["alg": .string("none")]), claims: TokenMint.claims(now: now), sign: nil)
        #expect(reason(v, none)?.message == "Unsigned auth tokens are not accepted.")
        // alg HS256 but no signature is unsigned too.
        let noSig = try TokenMint.token(header: .object(["alg": .string("HS256")]), claims: TokenMint.claims(now: now), sign: nil)
        #expect(reason(v, noSig)?.message == "Unsigned auth tokens are not accepted.")
        #expect(reason(v, "not-a-token")?.message == "Could not parse auth token.")
        #expect(reason(v, "")?.message == "Could not parse auth token.")
        #expect(reason(v, String(repeating: "a", count: JWTTokenVerifier.maxTokenBytes + 1))?.message == "Could not parse auth token.")
        // No credential at all is anonymous, not an error.
        var config = NodeConfiguration()
        config.tokenVerifier = v
        #expect(try config.identity(token: nil, address: nil, now: now) == .anonymous)
    }

    @Test func issuerAndAudienceAreCheckedWhenConfigured() async throws {
        let v = try await hsVerifier { $0.issuer = "https://issuer.example"; $0.audience = "ember-app" }
        let good = try await TokenMint.hs256(TokenMint.claims(now: now, extra: ["iss": .string("https://issuer.example"), "aud": .array([.string("x"), .string("ember-app")])]))
        #expect(reason(v, good) == nil)
        let badIss = try await TokenMint.hs256(TokenMint.claims(now: now, extra: ["iss": .string("https://evil.example"), "aud": .string("ember-app")]))
        #expect(reason(v, badIss)?.message == "Invalid auth token: issuer is not https://issuer.example.")
        let badAud = try await TokenMint.hs256(TokenMint.claims(now: now, extra: ["iss": .string("https://issuer.example"), "aud": .string("other")]))
        #expect(reason(v, badAud)?.message == "Invalid auth token: audience is not ember-app.")
    }

    @Test func rs256AndES256ViaJWKS() async throws {
        let rsa = try Insecure.RSA.PrivateKey(pem: TokenMint.rsaPEM)
        let (n, e) = try rsa.publicKey.getKeyPrimitives()
        let ec = ES256PrivateKey()
        let params = try #require(ec.publicKey.parameters)
        let jwks: JSON = .object(["keys": .array([
            .object(["kty": .string("RSA"), "kid": .string("r1"), "alg": .string("RS256"), "use": .string("sig"),
                     "n": .string(TokenMint.b64url(n)), "e": .string(TokenMint.b64url(e))]),
            .object(["kty": .string("EC"), "kid": .string("e1"), "crv": .string("P-256"),
                     "x": .string(params.x), "y": .string(params.y)]),
        ])])
        var s = JWTTokenVerifier.Settings()
        s.jwksJSON = jwks.serialized()
        let v = try await JWTTokenVerifier.make(s)
        let rsaKey = try await JWTKeyCollection().add(rsa: rsa, digestAlgorithm: .sha256).getKey()
        let ecKey = try await JWTKeyCollection().add(ecdsa: ec).getKey()
        let rsTok = try TokenMint.token(header: .object(["alg": .string("RS256"), "kid": .string("r1")]),
                                        claims: TokenMint.claims(sub: "rs-user", now: now)) { try rsaKey.sign($0) }
        let esTok = try TokenMint.token(header: .object(["alg": .string("ES256"), "kid": .string("e1")]),
                                        claims: TokenMint.claims(sub: "es-user", now: now)) { try ecKey.sign($0) }
        #expect(try v.identity(for: rsTok, address: nil, now: now).authVariable?["uid"] == .string("rs-user"))
        #expect(try v.identity(for: esTok, address: nil, now: now).authVariable?["uid"] == .string("es-user"))
        // The ES256 signature presented under the RSA key id, and a key id nobody has.
        let swapped = try TokenMint.token(header: .object(["alg": .string("ES256"), "kid": .string("r1")]),
                                          claims: TokenMint.claims(now: now)) { try ecKey.sign($0) }
        #expect(reason(v, swapped)?.message == "Invalid auth token: no key for algorithm ES256 and kid r1.")
        let otherEC = try await JWTKeyCollection().add(ecdsa: ES256PrivateKey()).getKey()
        let forged = try TokenMint.token(header: .object(["alg": .string("ES256"), "kid": .string("e1")]),
                                         claims: TokenMint.claims(now: now)) { try otherEC.sign($0) }
        #expect(reason(v, forged)?.message == "Invalid auth token signature.")
        // HS256 is not accepted when only public keys are configured (no key confusion).
        let hs = try await TokenMint.hs256(TokenMint.claims(now: now))
        #expect(reason(v, hs)?.message == "Invalid auth token: no key for algorithm HS256.")
    }

    @Test func ownerIsAdminOnlyFromTrustedAddressesAndAdminTokenFromAnywhere() async throws {
        let v = try await hsVerifier {
            $0.trustOwnerFrom = [CIDR("127.0.0.0/8")!, CIDR("::1")!]
            $0.adminTokens = ["admin-token-0123456789"]
        }
        #expect(try v.identity(for: "owner", address: "127.0.0.1", now: now) == .admin)
        #expect(try v.identity(for: "owner", address: "::1", now: now) == .admin)
        #expect(reason(v, "owner", address: "203.0.113.9")?.reason == .untrustedOwner)
        #expect(reason(v, "owner", address: nil)?.reason == .untrustedOwner)
        #expect(try v.identity(for: "admin-token-0123456789", address: "203.0.113.9", now: now) == .admin)
        #expect(reason(v, "admin-token-0123456780")?.message == "Could not parse auth token.")
    }

    @Test func badConfigurationsAreRefusedAtStartup() async throws {
        var s = JWTTokenVerifier.Settings()
        s.hmacSecrets = ["short"]
        await #expect(throws: AuthSetupError.self) { try await JWTTokenVerifier.make(s) }
        s = JWTTokenVerifier.Settings()
        s.jwksJSON = "{\"keys\": [{\"kty\": \"oct\", \"k\": \"abc\"}]}"
        await #expect(throws: AuthSetupError.self) { try await JWTTokenVerifier.make(s) }
        s.jwksJSON = "not json"
        await #expect(throws: AuthSetupError.self) { try await JWTTokenVerifier.make(s) }
        s = JWTTokenVerifier.Settings()
        s.adminTokens = ["tiny"]
        await #expect(throws: AuthSetupError.self) { try await JWTTokenVerifier.make(s) }
    }
}

@Suite struct CIDRAndModeTests {
    @Test func ipv4AndIPv6Networks() throws {
        let v4 = try #require(CIDR("10.1.0.0/16"))
        #expect(v4.contains("10.1.255.3") && !v4.contains("10.2.0.1") && !v4.contains("garbage"))
        #expect(v4.contains("::ffff:10.1.2.3"), "IPv4-mapped IPv6 peers are IPv4")
        let v6 = try #require(CIDR("fd00:abcd::/32"))
        #expect(v6.contains("fd00:abcd:1::5") && !v6.contains("fd00:abce::1") && !v6.contains("10.1.2.3"))
        #expect(CIDR("192.168.1.7")!.contains("192.168.1.7") && !CIDR("192.168.1.7")!.contains("192.168.1.8"))
        #expect(CIDR("0.0.0.0/0")!.contains("8.8.8.8") && !CIDR("0.0.0.0/0")!.contains("2001:db8::1"))
        #expect(CIDR("::/0")!.contains("2001:db8::1"))
        #expect(CIDR("10.0.0.0/33") == nil && CIDR("::1/129") == nil && CIDR("10.0.0.0/") == nil && CIDR("host.example") == nil)
        #expect(CIDR("10.0.0.9/29")!.contains("10.0.0.15") && !CIDR("10.0.0.9/29")!.contains("10.0.0.16"))
        #expect(CIDR("fe80::1%eth0") != nil)
        #expect(CIDR.parseList("127.0.0.1/32, ::1") .map(\.count) == .success(2))
        #expect(CIDR.parseList("127.0.0.1/32,nope") == .failure(CIDRListError(entry: "nope")))
    }

    @Test func protectedModeLikeRedis() {
        #expect(AuthMode.choose(host: "127.0.0.1", authConfigured: false, dev: false) == .success(.protected))
        #expect(AuthMode.choose(host: "::1", authConfigured: false, dev: false) == .success(.protected))
        #expect(AuthMode.choose(host: "localhost", authConfigured: false, dev: false) == .success(.protected))
        #expect(AuthMode.choose(host: "0.0.0.0", authConfigured: true, dev: false) == .success(.verified))
        #expect(AuthMode.choose(host: "0.0.0.0", authConfigured: false, dev: true) == .success(.development))
        guard case .failure(let e) = AuthMode.choose(host: "0.0.0.0", authConfigured: false, dev: false) else {
            Issue.record("a network address without auth must be refused"); return
        }
        #expect(e.description.hasPrefix("refusing to listen on 0.0.0.0 without auth"))
        #expect(AuthMode.choose(host: "10.0.0.5", authConfigured: false, dev: false).map { _ in true } != .success(true))
    }

    @Test func tokenBucketRefillsAtItsRate() {
        var b = TokenBucket(ratePerSecond: 10, burst: 3, now: 0)
        var taken: [Bool] = []
        for t: Int64 in [0, 0, 0, 0, 50, 100, 100] { taken.append(b.take(now: t)) }
        // Three from the burst, none until 100 ms at 10/s gives one back.
        #expect(taken == [true, true, true, false, false, true, false])
        taken = (0..<4).map { _ in b.take(now: 10_000) }
        #expect(taken == [true, true, true, false], "never above the burst")
    }

    @Test func tokenBucketRefillsAfterTheWallClockIsSetBack() {
        var b = TokenBucket(ratePerSecond: 10, burst: 2, now: 3_600_000)
        var taken = (0..<3).map { _ in b.take(now: 3_600_000) }
        // The clock goes back an hour: no token for the jump, but refills resume from there
        // rather than an hour later.
        for t: Int64 in [0, 50, 100] { taken.append(b.take(now: t)) }
        #expect(taken == [true, true, false, false, false, true])
    }

    @Test func connectionsPerAddressCountsAndReleases() {
        let c = ConnectionsPerAddress(limit: 2)
        #expect(c.acquire("1.2.3.4") && c.acquire("1.2.3.4") && !c.acquire("1.2.3.4"))
        #expect(c.acquire("5.6.7.8"), "another address is unaffected")
        c.release("1.2.3.4")
        #expect(c.acquire("1.2.3.4") && c.count("1.2.3.4") == 2)
        #expect(ConnectionsPerAddress(limit: 0).acquire("1.2.3.4"))
    }
}
