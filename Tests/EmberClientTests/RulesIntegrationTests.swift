import EmberCore
import Foundation
import Testing
@testable import EmberClient

/// Security rules as the Swift client meets them, against a real emberd started with a rules file.
@Suite(.timeLimit(.minutes(1))) struct RulesIntegrationTests {
    static let rules = #"""
    {"rules": {
      "room": {".read": true, "$msg": {".write": "newData.isString()"}},
      "locked": {".read": false, ".write": false},
      "open": {".read": true, ".write": true},
      "mine": {"$uid": {".read": "auth != null && auth.uid === $uid", ".write": "auth != null && auth.uid === $uid"}}
    }}
    """#

    /// An unsigned JWT: the default protected mode reads its claims.
    static func token(_ uid: String) -> String {
        func b64(_ s: String) -> String {
            Data(s.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        return b64(#"{"alg":"none"}"#) + "." + b64(#"{"sub":"\#(uid)","uid":"\#(uid)"}"#) + ".sig"
    }

    func server() async throws -> EmberServerProcess {
        let s = try EmberServerProcess(rules: Self.rules)
        try await s.start()
        return s
    }

    @Test func deniedSetRollsBackOptimisticEventsAndFails() async throws {
        let s = try await server()
        defer { s.stop() }
        let db = Database(url: s.databaseURL(ns: "r"), configuration: .fastReconnect)
        defer { db.shutdown() }
        let rec = Recorder()
        db.reference(withPath: "room").observe(.value) { rec.add($0.json) }
        await rec.wait { $0 == ["null"] }
        let done = Recorder()
        db.reference(withPath: "room/m").setValue(5) { error, _ in
            done.add((error as? DatabaseError)?.code.rawValue ?? "no error")
        }
        await done.wait { $0 == ["permission_denied"] }
        // The optimistic value was shown, then reverted when the server refused it.
        let seen = await rec.wait { $0.last == "null" && $0.count >= 3 }
        #expect(seen == ["null", #"{"m":5}"#, "null"])
        await #expect(throws: DatabaseError.self) { try await db.reference(withPath: "room/n").setValue(1) }
        try await db.reference(withPath: "room/n").setValue("ok")
        #expect(try await s.restGet("room", ns: "r") == .object(["n": .string("ok")]))
    }

    @Test func deniedListenIsCancelledAndAuthGrantsOwnData() async throws {
        let s = try await server()
        defer { s.stop() }
        let db = Database(url: s.databaseURL(ns: "r"), configuration: .fastReconnect)
        defer { db.shutdown() }
        let rec = Recorder()
        db.reference(withPath: "locked").observe(.value, with: { rec.add("value \($0.json)") },
                                                 withCancel: { rec.add("cancel \(($0 as? DatabaseError)?.code.rawValue ?? "?")") })
        await rec.wait { $0.contains("cancel permission_denied") }
        #expect(!rec.all.contains { $0.hasPrefix("value") })

        await #expect(throws: DatabaseError.self) { try await db.reference(withPath: "mine/alice/x").setValue(1) }
        db.setAuthToken(Self.token("alice"))
        try await db.reference(withPath: "mine/alice/x").setValue(1)
        await #expect(throws: DatabaseError.self) { try await db.reference(withPath: "mine/bob/x").setValue(1) }
        #expect(try await db.reference(withPath: "mine/alice").getData().childSnapshot(forPath: "x").value as? Int == 1)
    }

    @Test func rulesChangeCancelsListensThatLoseAccess() async throws {
        let s = try await server()
        defer { s.stop() }
        let db = Database(url: s.databaseURL(ns: "r"), configuration: .fastReconnect)
        defer { db.shutdown() }
        let rec = Recorder()
        db.reference(withPath: "open").observe(.value, with: { rec.add("value \($0.json)") },
                                               withCancel: { rec.add("cancel \(($0 as? DatabaseError)?.code.rawValue ?? "?")") })
        await rec.wait { $0 == ["value null"] }
        let (status, body) = try await EmberServerProcess.http(
            "PUT", "\(s.baseURL)/.settings/rules.json?ns=r&auth=owner", body: #"{"rules": {"room": {".read": true}}}"#)
        #expect(status == 200, "\(body)")
        await rec.wait { $0.contains("cancel permission_denied") }
    }
}
