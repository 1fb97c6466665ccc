import EmberCore
import Foundation
import Testing
import EmberTestSupport
@testable import EmberStorage

/// Entries are applied straight into their batch's transaction; only a batch in which an entry
/// throws is redone with a nested transaction per entry (`Writer.ApplyMode`).
@Suite(.printsSeedOnFailure) struct FlatApplyTests {
    func entry(_ i: Int, _ op: WriteOperation, _ auth: WriteAuth = .admin) -> LogEntry {
        LogEntry(index: UInt64(i), term: 1, namespace: "t", operation: op, timestamp: 1_000 + Int64(i), auth: auth)
    }

    @Test func ordinaryBatchesNeverFallBackToNestedTransactions() async throws {
        let s = try openStore()
        try await withThrowingTaskGroup(of: Void.self) { g in
            for i in 0..<300 {
                g.addTask { _ = try await s.submit(namespace: "t", .set(path: p("/w/k\(i % 50)"), value: .int(Int64(i)))) }
            }
            try await g.waitForAll()
        }
        #expect(s.metrics.nestedRetries == 0)
        #expect(s.metrics.batches < 300)  // they were grouped, so flat batches held several entries
        #expect(try s.get("/w").children.count == 50)
    }

    /// A throwing entry in the middle of a batch: the flat attempt is thrown away, the nested
    /// redo rejects that entry alone and keeps the others, with the same versions a nested-only
    /// apply gives.
    @Test func aThrowingEntryIsRejectedAloneAfterTheRedo() async throws {
        let s = try openStore()
        let entries = [
            entry(1, .set(path: p("/a"), value: .int(1))),
            entry(2, .update(path: p("/"), values: [(p("b/c"), .int(2)), (p("d"), .string("x"))])),
            // Only an admin may change rules: Applier throws, at apply time.
            entry(3, .setRules(text: #"{"rules": {".write": false}}"#), .user(nil)),
            entry(4, .set(path: p("/a"), value: .int(4))),
        ]
        let results = try await s.apply(entries: entries)
        #expect(results.map(\.index) == [1, 2, 3, 4])
        guard case .rejected = results[2].outcome else {
            Issue.record("entry 3 should be rejected, got \(results[2].outcome)")
            return
        }
        for i in [0, 1, 3] {
            guard case .applied(changed: true) = results[i].outcome else {
                Issue.record("entry \(i + 1): \(results[i].outcome)")
                continue
            }
        }
        #expect(s.metrics.nestedRetries == 1)
        #expect(try s.get("/") == n(#"{"a": 4, "b": {"c": 2}, "d": "x"}"#))
        #expect(try s.ver("/a") == 4 && s.ver("/b/c") == 2 && s.ver("/") == 4)
        #expect(s.appliedIndex == 4)
        // The rejected rules change left no rules: a user write is still allowed.
        let r = try await s.submit(namespace: "t", .set(path: p("/e"), value: .int(5)), auth: .user(nil))
        guard case .applied = r.outcome else {
            Issue.record("write after the rejected rules change: \(r.outcome)")
            return
        }
    }

    /// The same random writes applied flat (ancestor versions written once per transaction) and
    /// nested (each write rewrites its ancestors' records; forced by a rejected entry at the end
    /// of the batch) leave the same tree, the same version at every path and the same results.
    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func flatAndNestedApplyAgreeOnVersions(seed: UInt64) async throws {
        var g = TestSeed.generator(seed)
        let keys = ["a", "b", "1", "2", "x"]
        func randomPath() -> [String] { (0..<Int.random(in: 1...4, using: &g)).map { _ in keys.randomElement(using: &g)! } }
        func randomValue(_ depth: Int) -> JSON {
            switch Int.random(in: 0..<6, using: &g) {
            case 0: return .null
            case 1, 2: return .int(Int64.random(in: 0..<5, using: &g))
            default:
                guard depth < 3 else { return .string("s") }
                var d: KeyMap<JSON> = [:]
                for _ in 0..<Int.random(in: 1...3, using: &g) { d[keys.randomElement(using: &g)!] = randomValue(depth + 1) }
                return .object(d)
            }
        }
        var entries: [LogEntry] = []
        var touched: Set<[String]> = [[]]
        for i in 1...400 {
            let path = randomPath()
            for k in 0...path.count { touched.insert(Array(path.prefix(k))) }
            let op: WriteOperation
            if Bool.random(using: &g) {
                op = .set(path: Path(validated: path), value: randomValue(path.count))
            } else {
                var parts: [(Path, JSON)] = []
                var seen: Set<String> = []
                for _ in 0..<Int.random(in: 1...3, using: &g) {
                    let k = keys.randomElement(using: &g)!
                    guard seen.insert(k).inserted else { continue }
                    parts.append((Path(validated: [k]), randomValue(path.count + 1)))
                    touched.insert(path + [k])
                }
                op = .update(path: Path(validated: path), values: parts)
            }
            entries.append(entry(i, op))
        }
        let flat = try openStore(), nested = try openStore()
        let flatResults = try await flat.apply(entries: entries + [entry(401, .noop)])
        let nestedResults = try await nested.apply(entries: entries + [entry(401, .setRules(text: #"{"rules": {}}"#), .user(nil))])
        #expect(flat.metrics.nestedRetries == 0 && nested.metrics.nestedRetries == 1)
        #expect(flatResults.dropLast() == nestedResults.dropLast())
        #expect(try flat.get("/") == nested.get("/"))
        for path in touched {
            let text = "/" + path.joined(separator: "/")
            #expect(try flat.ver(text) == nested.ver(text), "version of \(text)")
        }
        #expect(try flat.stateHash(namespace: "t") == nested.stateHash(namespace: "t"))
        // No version record more or less: none left behind below a later write, none missing.
        #expect(try versionRows(flat) == versionRows(nested))
    }

    func versionRows(_ s: EmberStore) throws -> [[UInt8]: [UInt8]] {
        try s.withRead { t in
            var rows: [[UInt8]: [UInt8]] = [:]
            try t.scan(s.tables.verS, prefix: []) { k, v in rows[k] = v; return true }
            return rows
        }
    }
}
