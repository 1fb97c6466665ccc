import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// onDisconnect bookkeeping applied from the log (real LMDB stores): registration, cancel, run
/// once, incarnations and seals, rules judged at run time as the registering user.
@Suite struct OnDisconnectApplyTests {
    let s1 = OnDisconnectSession(node: "n1", incarnation: "i1", id: "c-1")

    /// Entries with consecutive indexes and timestamps 1000 + index.
    struct Log {
        var entries: [LogEntry] = []
        mutating func add(_ op: WriteOperation, _ auth: WriteAuth = .admin, ns: String = "t") {
            let i = UInt64(entries.count + 1)
            entries.append(LogEntry(index: i, term: 1, namespace: ns, operation: op, timestamp: 1_000 + Int64(i), auth: auth))
        }
        mutating func odc(_ op: OnDisconnectOperation, _ auth: WriteAuth = .admin, ns: String = "t") {
            add(.onDisconnect(op), auth, ns: ns)
        }
    }

    func user(_ uid: String) -> WriteAuth { .user(.object(["uid": .string(uid)])) }

    @Test func registeredWritesRunOnceInOrder() async throws {
        let s = try openStore()
        var log = Log()
        log.odc(.holder(node: "n1", incarnation: "i1"), ns: OnDisconnectTable.namespace)
        log.odc(.register(session: s1, write: .set(path: p("/p/u1"), value: .object(["online": .bool(false)]))))
        log.odc(.register(session: s1, write: .update(path: p("/p/u1"), values: [(p("seen"), .object([".sv": .string("timestamp")]))])))
        log.add(.set(path: p("/p/u1"), value: j(#"{"online": true}"#)))
        var results = try await s.apply(entries: log.entries)
        #expect(results.allSatisfy { if case .applied = $0.outcome { return true } else { return false } })
        // Registered writes change nothing visible, and no listener hears of them.
        #expect(results[0..<3].allSatisfy { $0.changeSet.changes.isEmpty && $0.ran.isEmpty })
        #expect(try s.get("/p/u1") == n(#"{"online": true}"#))
        #expect(try pending(s, s1).count == 2)

        log.odc(.run(session: s1))
        results = try await s.apply(entries: log.entries)
        let run = try #require(results.last)
        #expect(run.ran.count == 2 && run.ran.allSatisfy(\.isApplied))
        // In registration order, at the run's index; a server timestamp is the run's time.
        #expect(try s.get("/p/u1") == n(#"{"online": false, "seen": 1005}"#))
        #expect(run.ran.map(\.index) == [5, 5] && run.ran[0].changeSet.changes.map(\.path) == [p("/p/u1")])
        #expect(try pending(s, s1).isEmpty)

        // A second run (the leader's sweep after a clean disconnect) runs nothing.
        log.add(.set(path: p("/p/u1/online"), value: .bool(true)))
        log.odc(.run(session: s1))
        results = try await s.apply(entries: log.entries)
        #expect(results.last?.ran.isEmpty == true)
        #expect(try s.get("/p/u1/online") == n("true"))
    }

    @Test func onlyTheHoldingIncarnationRegisters() async throws {
        let s = try openStore()
        var log = Log()
        let reserved = OnDisconnectTable.namespace
        log.odc(.register(session: s1, write: .set(path: p("/a"), value: .int(1))))                  // 1: no holder yet
        log.odc(.holder(node: "n1", incarnation: "i1"), ns: reserved)                                       // 2
        log.odc(.register(session: s1, write: .set(path: p("/a"), value: .int(2))))                  // 3: ok
        log.odc(.seal(node: "n1", incarnation: "i0"), ns: reserved)                                         // 4: not the holder: no-op
        log.odc(.register(session: s1, write: .set(path: p("/b"), value: .int(3))))                  // 5: ok
        log.odc(.seal(node: "n1", incarnation: "i1"), ns: reserved)                                         // 6: sealed
        log.odc(.register(session: s1, write: .set(path: p("/c"), value: .int(4))))                  // 7: refused
        log.odc(.holder(node: "n1", incarnation: "i2"), ns: reserved)                                       // 8: restarted
        let s2 = OnDisconnectSession(node: "n1", incarnation: "i2", id: "c-2")
        log.odc(.register(session: s2, write: .set(path: p("/d"), value: .int(5))))                  // 9: ok
        let results = try await s.apply(entries: log.entries)
        func failed(_ r: WriteResult) -> Bool { if case .conditionFailed = r.outcome { return true } else { return false } }
        #expect(results.map(failed) == [true, false, false, false, false, false, true, false, false])
        #expect(results[3].outcome == .applied(changed: false) && results[5].outcome == .applied(changed: true))
        // The sealed incarnation's session keeps its two writes until some node runs them.
        #expect(try pending(s, s1).map(\.operation) == [.set(path: p("/a"), value: .int(2)), .set(path: p("/b"), value: .int(3))])
        #expect(try pending(s, s2).count == 1)
        #expect(try s.read(namespace: reserved, path: p("/holders/n1")).node == n(#""i2""#))
    }

    @Test func cancelDropsTheWritesAtOrBelowItsLocation() async throws {
        let s = try openStore()
        var log = Log()
        log.odc(.holder(node: "n1", incarnation: "i1"), ns: OnDisconnectTable.namespace)
        log.odc(.register(session: s1, write: .set(path: p("/a/b"), value: .int(1))))
        log.odc(.register(session: s1, write: .set(path: p("/x"), value: j(#"{"keep": 1, "gone": 2}"#))))
        log.odc(.register(session: s1, write: .set(path: p("/y"), value: .int(3))))
        log.odc(.cancel(session: s1, path: p("/x/gone")))
        log.odc(.cancel(session: s1, path: p("/y")))
        log.add(.set(path: p("/x/gone"), value: .int(7)))
        log.odc(.run(session: s1))
        let results = try await s.apply(entries: log.entries)
        #expect(results.last?.ran.count == 2)
        #expect(try s.get("/a/b") == n("1") && s.get("/x") == n(#"{"keep": 1, "gone": 7}"#) && s.get("/y").isEmpty)
        // Cancelling everything leaves nothing to run.
        var more = log
        more.odc(.register(session: s1, write: .set(path: p("/z"), value: .int(1))))
        more.odc(.cancel(session: s1, path: .root))
        more.odc(.run(session: s1))
        let after = try await s.apply(entries: more.entries)
        #expect(try after.last?.ran.isEmpty == true && s.get("/z").isEmpty)
    }

    @Test func rulesJudgeEachWriteAsItsRegistrantWhenItRuns() async throws {
        let s = try openStore()
        var log = Log()
        log.add(.setRules(text: #"{"rules": {"u": {"$uid": {".write": "auth != null && auth.uid === $uid"}}}}"#))
        log.odc(.holder(node: "n1", incarnation: "i1"), ns: OnDisconnectTable.namespace)
        log.odc(.register(session: s1, write: .set(path: p("/u/alice/online"), value: .bool(false))), user("alice"))
        log.odc(.register(session: s1, write: .set(path: p("/u/carol/online"), value: .bool(false))), user("bob"))
        // An increment registered while the value was 1 adds to the value when it runs.
        log.add(.set(path: p("/u/alice/n"), value: .int(1)))
        log.odc(.register(session: s1, write: .set(path: p("/u/alice/n"), value: j(#"{".sv": {"increment": 1}}"#))), user("alice"))
        log.add(.set(path: p("/u/alice/n"), value: .int(10)))
        log.odc(.run(session: s1))
        let results = try await s.apply(entries: log.entries)
        let ran = try #require(results.last?.ran)
        #expect(try ran.count == 3 && s.get("/u/alice/n") == n("11"))
        #expect(ran[0].isApplied && ran[1].outcome == .denied)
        #expect(try s.get("/u/alice/online") == n("false") && s.get("/u/carol").isEmpty)
        #expect(try pending(s, s1).isEmpty)
    }

    @Test func replicasAgreeAndEntriesRoundTrip() async throws {
        var log = Log()
        let reserved = OnDisconnectTable.namespace
        log.odc(.holder(node: "n.1", incarnation: "i1"), ns: reserved)
        let dotted = OnDisconnectSession(node: "n.1", incarnation: "i1", id: "c-1")
        log.odc(.register(session: dotted, write: .update(path: p("/p"), values: [(p("a"), .int(1)), (p("b/c"), .double(2))])), user("u"))
        log.odc(.cancel(session: dotted, path: p("/p/a")))
        log.odc(.seal(node: "n.1", incarnation: "i1"), ns: reserved)
        log.odc(.run(session: dotted))
        for e in log.entries { #expect(try LogEntry(decoding: e.encoded()) == e) }
        var hashes: [String] = []
        for _ in 0..<2 {
            let s = try openStore()
            let results = try await s.apply(entries: log.entries)
            #expect(results.last?.ran.count == 1)
            #expect(try s.get("/p") == n(#"{"b": {"c": 2.0}}"#))
            hashes.append(try s.stateHash())
        }
        #expect(hashes[0] == hashes[1])
    }

    @Test func badBookkeepingIsRefusedBeforeTheLog() throws {
        let s = try openStore()
        func refused(_ ns: String, _ op: OnDisconnectOperation) -> Bool {
            (try? s.validate(namespace: ns, operation: .onDisconnect(op))) == nil
        }
        #expect(!refused("t", .register(session: s1, write: .set(path: p("/a"), value: .int(1)))))
        #expect(refused("t", .register(session: OnDisconnectSession(node: "n/1", incarnation: "i", id: "c"), write: .set(path: p("/a"), value: .int(1)))))
        #expect(refused("t", .holder(node: "n1", incarnation: "")))
        #expect(refused("t", .run(session: OnDisconnectSession(node: "n1", incarnation: "i", id: String(repeating: "x", count: 65)))))
        #expect(refused("t", .register(session: s1, write: .set(path: p("/a"), value: .int(1), condition: .ifHash("")))))
        #expect(refused("t", .register(session: s1, write: .set(path: p("/a"), value: j(#"{"bad.key": 1}"#)))))
        #expect(refused(OnDisconnectTable.namespace, .register(session: s1, write: .set(path: p("/a"), value: .int(1)))))
        // A nested bookkeeping operation is never a registrable write, nor decodable as one.
        #expect(refused("t", .register(session: s1, write: .onDisconnect(.run(session: s1)))))
        var w = ByteWriter()
        OnDisconnectOperation.register(session: s1, write: .noop).encode(into: &w)
        var r = ByteReader(w.bytes)
        #expect(throws: StorageError.self) { _ = try OnDisconnectOperation(decoding: &r, limit: w.bytes.count) }
    }

    func pending(_ s: EmberStore, _ session: OnDisconnectSession, ns: String = "t") throws -> [LogEntry] {
        let node = try s.read(namespace: OnDisconnectTable.namespace, path: OnDisconnectTable.sessionPath(session, namespace: ns)).node
        return try node.children.keys.sorted().map { try OnDisconnectTable.decodeStoredWrite(node.child($0)) }
    }
}
