import EmberTestSupport
import EmberCore
import Foundation
import JWTKit
import Synchronization
import Testing
@testable import EmberClient

/// The token provider against a real emberd with HS256 verification: used at connect, asked
/// again (forced) when the node refuses a token or revokes an expired one with `ac`.
@Suite(.timeLimit(.minutes(1))) struct AuthTokenProviderTests {
    static let secret = "client-test-secret-0123456789abcdef"

    static func mint(sub: String, expiresIn: Int64, secret: String = secret) async throws -> String {
        func b64url(_ bytes: some DataProtocol) -> String {
            Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        let now = Int64(Date().timeIntervalSince1970)
        let header = JSON.object(["alg": .string("HS256"), "typ": .string("JWT")]).serialized()
        let claims = JSON.object(["sub": .string(sub), "iat": .int(now), "exp": .int(now + expiresIn)]).serialized()
        let input = b64url(Array(header.utf8)) + "." + b64url(Array(claims.utf8))
        let key = try await JWTKeyCollection().add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256).getKey()
        return input + "." + b64url(try key.sign(Array(input.utf8)))
    }

    func authServer(rules: String? = nil) async throws -> EmberServerProcess {
        let secretFile = TestDirectory.root + "ember-auth-secret-" + UUID().uuidString
        try Self.secret.write(toFile: secretFile, atomically: true, encoding: .utf8)
        let server = try EmberServerProcess(rules: rules, extraArgs: ["--auth-hs256-secret-file", secretFile])
        try await server.start()
        return server
    }

    /// A client whose provider records each call (`force=true|false`) and returns `token(force)`.
    func client(_ server: EmberServerProcess, ns: String, calls: Recorder,
                token: @escaping @Sendable (Bool) async throws -> String) -> Database {
        var config = DatabaseConfiguration.fastReconnect
        config.authTokenProvider = { force in
            calls.add("force=\(force)")
            return try await token(force)
        }
        return Database(url: server.databaseURL(ns: ns), configuration: config)
    }

    @Test func expiredTokenIsRevokedAndTheProviderIsAskedForAFreshOne() async throws {
        let server = try await authServer()
        defer { server.stop() }
        let calls = Recorder()
        // Every token lives 2 s: the node revokes it (`ac`) and the client must come back.
        let db = client(server, ns: "authprov", calls: calls) { _ in try await Self.mint(sub: "u1", expiresIn: 2) }
        defer { db.shutdown() }
        let connected = Recorder()
        db.reference(withPath: ".info/connected").observe(.value) { s in connected.add("\(s.value as? Bool ?? false)") }
        await connected.wait { $0.last == "true" }
        try await db.reference(withPath: "a").setValue(1)
        // Revocation: disconnect, a forced refresh, connected again.
        let seen = await calls.wait(timeout: .seconds(15)) { $0.contains("force=true") }
        #expect(seen.first == "force=false")
        await connected.wait { $0.contains("false") && $0.last == "true" }
        try await db.reference(withPath: "a").setValue(2)
        #expect(try await server.restGet("a", ns: "authprov") == .int(2))
    }

    @Test func refusedTokenIsReplacedWithAForcedRefresh() async throws {
        let server = try await authServer()
        defer { server.stop() }
        let calls = Recorder()
        // The cached token is signed with the wrong key; a forced refresh gets a good one.
        let db = client(server, ns: "authref", calls: calls) { force in
            try await Self.mint(sub: "u2", expiresIn: 3600, secret: force ? Self.secret : "wrong-secret-0123456789abcdef-xyz")
        }
        defer { db.shutdown() }
        // The connection starts on first use, as in the SDK: start it now.
        _ = db.repo
        let seen = await calls.wait { $0.contains("force=true") }
        #expect(seen.first == "force=false")
        try await db.reference(withPath: "b").setValue("ok")
        #expect(try await server.restGet("b", ns: "authref") == .string("ok"))
        // A good token is not replaced again: a later write is answered on the same connection
        // (a refusal of the token would have come first, and a new connection asks anew).
        try await db.reference(withPath: "c").setValue("ok")
        #expect(calls.all.count == 2, "\(calls.all)")
    }

    @Test func providerSetWhileConnectedAuthenticatesTheOpenConnection() async throws {
        let server = try await authServer(rules: #"{"rules": {".read": true, "private": {".write": "auth != null"}}}"#)
        defer { server.stop() }
        let db = Database(url: server.databaseURL(ns: "authset"), configuration: .fastReconnect)
        defer { db.shutdown() }
        await #expect(throws: DatabaseError.self) { try await db.reference(withPath: "private/x").setValue(1) }
        db.setAuthTokenProvider { _ in try await Self.mint(sub: "u3", expiresIn: 3600) }
        // The token is fetched off the connection's queue; the next writes pass once it is sent.
        let passed = try await eventually {
            do { try await db.reference(withPath: "private/x").setValue(2); return true } catch { return false }
        }
        #expect(passed)
        #expect(try await server.restGet("private/x", ns: "authset") == .int(2))
    }
}
