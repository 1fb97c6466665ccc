import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// Entries are applied straight into their batch's transaction; only a batch in which an entry
/// throws is redone with a nested transaction per entry (`Writer.ApplyMode`).
@Suite struct FlatApplyTests {
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
}
