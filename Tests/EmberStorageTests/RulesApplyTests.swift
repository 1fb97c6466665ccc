import EmberCore
import EmberRules
import Foundation
import Testing
@testable import EmberStorage

/// Writes judged by the rules when their log entry is applied (real LMDB stores).
@Suite struct RulesApplyTests {
    static let rules = #"""
    {"rules": {
      "users": {"$uid": {".write": "auth != null && auth.uid === $uid",
                         "name": {".validate": "newData.isString() && newData.val().length <= 10"}}},
      "open": {".write": true, ".indexOn": "n"},
      "stamp": {".write": "auth != null", ".validate": "newData.val() === now"},
      "admins": {".write": false},
      "gated": {".write": "root.child('admins').child(auth.uid).exists()"}
    }}
    """#

    func user(_ uid: String) -> WriteAuth { .user(.object(["uid": .string(uid)])) }

    func set(_ s: EmberStore, _ path: String, _ json: String, _ auth: WriteAuth) async throws -> WriteResult {
        try await s.submit(namespace: "t", .set(path: p(path), value: j(json)), auth: auth)
    }

    @Test func writesAreJudgedAtApply() async throws {
        let s = try openStore()
        let setup = try await s.submit(namespace: "t", .setRules(text: Self.rules))
        #expect(setup.rulesChanged && s.storedRules(namespace: "t") != nil)

        #expect(try await set(s, "/users/alice/name", #""Alice""#, user("alice")).isApplied)
        let denied = try await set(s, "/users/alice/name", #""Mallory""#, user("bob"))
        #expect(denied.outcome == .denied && denied.changeSet.changes.isEmpty)
        #expect(try s.get("/users/alice/name") == n(#""Alice""#))
        // Anonymous, validation (type and length), admin bypass.
        #expect(try await set(s, "/users/alice/name", #""x""#, .user(nil)).outcome == .denied)
        #expect(try await set(s, "/users/alice/name", "5", user("alice")).outcome == .denied)
        #expect(try await set(s, "/users/alice/name", #""abcdefghijk""#, user("alice")).outcome == .denied)
        #expect(try await set(s, "/admins/x", "true", .admin).isApplied)
        #expect(try await set(s, "/admins/carol", "true", user("carol")).outcome == .denied)
        // `.validate` does not apply to deletes.
        #expect(try await set(s, "/users/alice/name", "null", user("alice")).isApplied)
        // `now` is the entry's timestamp.
        let stamped = try await s.submit(namespace: "t", .set(path: p("/stamp"), value: .object([".sv": .string("timestamp")])), auth: user("a"))
        #expect(stamped.isApplied)
        #expect(try await set(s, "/stamp", "12", user("a")).outcome == .denied)
        // `root` lookups.
        #expect(try await set(s, "/gated", "1", user("x")).isApplied)
        #expect(try await set(s, "/gated", "2", user("y")).outcome == .denied)
        // A denied write changes no version.
        let v = try s.ver("/gated")
        _ = try await set(s, "/gated", "3", user("y"))
        #expect(try s.ver("/gated") == v && s.get("/gated") == n("1"))
    }

    @Test func multiPathUpdateIsAllOrNothing() async throws {
        let s = try openStore()
        _ = try await s.submit(namespace: "t", .setRules(text: Self.rules))
        let parts: [(Path, JSON)] = [(p("users/alice/name"), .string("A")), (p("users/bob/name"), .string("B"))]
        let r = try await s.submit(namespace: "t", .update(path: .root, values: parts), auth: user("alice"))
        #expect(r.outcome == .denied)
        #expect(try s.get("/users").isEmpty)
        let ok = try await s.submit(namespace: "t", .update(path: p("/users/alice"), values: [(p("name"), .string("A"))]), auth: user("alice"))
        #expect(ok.isApplied)
    }

    @Test func rulesSurviveRestartAndBadRulesAreRefused() async throws {
        let dir = tempDir()
        do {
            let s = try openStore(dir)
            _ = try await s.submit(namespace: "t", .setRules(text: Self.rules))
            #expect(throws: StorageError.self) { _ = try s.validate(namespace: "t", operation: .setRules(text: "{\"rules\": {\n\".read\": \"auth.\"}}")) }
            s.close()
        }
        let s = try openStore(dir)
        #expect(s.storedRules(namespace: "t")?.text == Self.rules)
        #expect(try await set(s, "/admins/x", "1", user("x")).outcome == .denied)
        // Indexes come from the stored rules' `.indexOn`.
        #expect(try s.hasIndex(namespace: "t", path: p("/open"), index: .child(p("n"))))
        // Other namespaces keep the default (none: open).
        #expect(try await s.submit(namespace: "u", .set(path: p("/admins/x"), value: .int(1)), auth: user("x")).isApplied)
    }

    @Test func defaultRulesAndOpenRulesShortCircuit() async throws {
        let s = try openStore()
        s.setDefaultRules(try RulesEngine(text: #"{"rules": {".read": true, ".write": "auth != null"}}"#))
        #expect(try await set(s, "/a", "1", .user(nil)).outcome == .denied)
        #expect(try await set(s, "/a", "1", user("u")).isApplied)
        let open = try RulesEngine(text: #"{"rules": {".read": true, ".write": true}}"#)
        #expect(open.writeGrantedWithoutEvaluation(at: [p("/x/y")]))
        let authOnly = try RulesEngine(text: #"{"rules": {"u": {"$uid": {".write": "auth.uid === $uid"}}}}"#)
        #expect(!authOnly.writeGrantedWithoutEvaluation(at: [p("/u/a")]))
    }

    /// Raft replicas apply the same entries (rules change included) and reach the same verdicts.
    @Test func replicasReachTheSameVerdicts() async throws {
        var entries: [LogEntry] = []
        func add(_ op: WriteOperation, _ auth: WriteAuth) {
            let i = UInt64(entries.count + 1)
            entries.append(LogEntry(index: i, term: 1, namespace: "t", operation: op, timestamp: 1_000 + Int64(i), auth: auth))
        }
        add(.set(path: p("/admins/x"), value: .bool(true)), .admin)
        add(.set(path: p("/gated"), value: .int(1)), user("x"))        // open (no rules yet)
        add(.setRules(text: Self.rules), .admin)
        add(.set(path: p("/gated"), value: .int(2)), user("x"))        // admin lookup: allowed
        add(.set(path: p("/gated"), value: .int(3)), user("y"))        // denied
        add(.set(path: p("/stamp"), value: .int(1_006)), user("y"))    // now = this entry's timestamp: allowed
        add(.setRules(text: #"{"rules": {".write": false}}"#), user("y"))  // not admin: rejected
        var verdicts: [[String]] = []
        var hashes: [String] = []
        for _ in 0..<2 {
            let s = try openStore()
            let results = try await s.apply(entries: entries)
            verdicts.append(results.map { "\($0.outcome)" })
            hashes.append(try s.stateHash(namespace: "t"))
            #expect(try s.get("/gated") == n("2"))
        }
        #expect(verdicts[0] == verdicts[1] && hashes[0] == hashes[1])
        #expect(verdicts[0][4] == "\(WriteOutcome.denied)" && verdicts[0][5].hasPrefix("applied"))
        #expect(verdicts[0][6].hasPrefix("rejected"))
    }

    @Test func logEntryCarriesAuth() throws {
        for auth in [WriteAuth.admin, .user(nil), .user(.object(["uid": .string("u"), "n": .double(2)]))] {
            let e = LogEntry(index: 3, term: 1, namespace: "t", operation: .set(path: p("/a"), value: .int(1)), timestamp: 5, auth: auth)
            #expect(try LogEntry(decoding: e.encoded()) == e)
        }
        let r = LogEntry(index: 4, term: 1, namespace: "t", operation: .setRules(text: Self.rules), timestamp: 5)
        #expect(try LogEntry(decoding: r.encoded()) == r)
    }
}
