import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// Exactly-once for stamped client writes (real LMDB stores): a write sent again with its stamp
/// is answered as the first time and not applied again, on every replica alike.
@Suite struct WriterStampTests {
    let increment = j(#"{".sv": {"increment": 1}}"#)

    func stamp(_ n: UInt64, _ w: String = "w1") -> WriterStamp { WriterStamp(writer: w, seq: n) }

    @Test func anIncrementSentAgainCountsOnceAlsoAfterARestart() async throws {
        let dir = tempDir()
        var s = try openStore(dir)
        let first = try await s.submit(namespace: "t", .set(path: p("/c"), value: increment), writer: stamp(1))
        #expect(first.isApplied && !first.duplicate)
        let again = try await s.submit(namespace: "t", .set(path: p("/c"), value: increment), writer: stamp(1))
        #expect(again.duplicate && again.isApplied && again.changeSet.changes.isEmpty)
        #expect(again.value == Node(.int(1)))
        #expect(try s.get("/c") == Node(.int(1)))
        // A write without a stamp, and a new number, run as usual.
        try await s.submit(namespace: "t", .set(path: p("/c"), value: increment))
        try await s.submit(namespace: "t", .update(path: p("/"), values: [(p("c"), increment)]), writer: stamp(2))
        #expect(try s.get("/c") == Node(.int(3)))
        s.close()
        // The log's memory of the writer is replicated state: it outlives the process.
        s = try openStore(dir)
        defer { s.close() }
        let late = try await s.submit(namespace: "t", .update(path: p("/"), values: [(p("c"), increment)]), writer: stamp(2))
        #expect(late.duplicate)
        try await s.submit(namespace: "t", .set(path: p("/c"), value: increment), writer: stamp(1, "other"))
        #expect(try s.get("/c") == Node(.int(4)))
    }

    @Test func eachNumberIsAnsweredWithItsFirstOutcome() async throws {
        let s = try openStore()
        defer { s.close() }
        try await s.submit(namespace: "t", .setRules(text: #"{"rules": {".read": true, "open": {".write": true}}}"#))
        let user = WriteAuth.user(.object(["uid": .string("u")]))
        let denied = try await s.submit(namespace: "t", .set(path: p("/shut"), value: .int(1)), auth: user, writer: stamp(1))
        #expect(denied.outcome == .denied)
        try await s.submit(namespace: "t", .set(path: p("/open/x"), value: .int(1)), auth: user, writer: stamp(2))
        let stale = try await s.submit(namespace: "t", .set(path: p("/open/x"), value: .int(5), condition: .ifVersion(999)),
                                       auth: user, writer: stamp(3))
        guard case .conditionFailed = stale.outcome else { Issue.record("\(stale.outcome)"); return }
        // Sent again (after the rules opened up): the first answers stand, nothing is written.
        try await s.submit(namespace: "t", .setRules(text: #"{"rules": {".read": true, ".write": true}}"#))
        let r1 = try await s.submit(namespace: "t", .set(path: p("/shut"), value: .int(1)), auth: user, writer: stamp(1))
        #expect(r1.outcome == .denied && r1.duplicate)
        let r3 = try await s.submit(namespace: "t", .set(path: p("/open/x"), value: .int(5), condition: .ifVersion(999)),
                                    auth: user, writer: stamp(3))
        guard case .conditionFailed(let current, _) = r3.outcome else { Issue.record("\(r3.outcome)"); return }
        #expect(current == Node(.int(1)) && r3.duplicate)
        #expect(try s.get("/shut").isEmpty && s.get("/open/x") == Node(.int(1)))
        // A number below the newest that never reached the log runs now (it was lost, not run).
        try await s.submit(namespace: "t", .set(path: p("/late"), value: .int(7)), auth: user, writer: stamp(10))
        let gap = try await s.submit(namespace: "t", .set(path: p("/gap"), value: .int(4)), auth: user, writer: stamp(4))
        #expect(gap.isApplied && !gap.duplicate)
        #expect(try s.get("/gap") == Node(.int(4)))
    }

    @Test func replicasApplyingTheSameLogAgreeAndForgetOldWriters() async throws {
        let day: Int64 = 24 * 3600 * 1000
        var entries: [LogEntry] = []
        func add(_ op: WriteOperation, _ w: WriterStamp?, at time: Int64) {
            let i = UInt64(entries.count + 1)
            entries.append(LogEntry(index: i, term: 1, namespace: "t", operation: op, timestamp: time, writer: w))
        }
        let inc = WriteOperation.set(path: p("/c"), value: increment)
        add(inc, stamp(1, "a"), at: 1_000)
        add(inc, stamp(1, "b"), at: 2_000)
        add(inc, stamp(1, "a"), at: 3_000)  // again: not counted
        add(inc, stamp(2, "a"), at: 4_000)
        // Forty days later writer "c" writes: its probe looks at the records after its own key.
        add(inc, stamp(1, "c"), at: 40 * day)
        let (r1, r2) = (try openStore(), try openStore())
        defer { r1.close(); r2.close() }
        let out1 = try await r1.apply(entries: entries)
        let out2 = try await r2.apply(entries: entries)
        #expect(out1.map(\.duplicate) == [false, false, true, false, false])
        #expect(out1 == out2)
        #expect(try r1.get("/c") == Node(.int(4)))
        #expect(try r1.stateHash() == r2.stateHash())
        // "a" and "b" were last seen 40 days before: dropped; "c" is kept.
        let kept = try r1.shallowKeys(namespace: WriterTable.namespace, path: .root)
        #expect(kept == ["c"])
        // A writer forgotten that way starts afresh: its old numbers run again.
        let again = try await r1.submit(namespace: "t", inc, writer: stamp(2, "a"))
        #expect(try !again.duplicate && r1.get("/c") == Node(.int(5)))
    }

    @Test func theWindowRemembersTheLast64NumbersAndTreatsOlderOnesAsRun() {
        var r = WriterTable.Record.fresh(1, .applied, at: 10)
        for n in 2...40 { r.note(UInt64(n), n % 3 == 0 ? .denied : .applied, at: 10 + Int64(n)) }
        r.note(45, .conditionFailed, at: 100)
        #expect(r.last == 45 && r.seenAt == 100)
        #expect(r.outcome(of: 45) == .conditionFailed)
        #expect(r.outcome(of: 44) == nil && r.outcome(of: 41) == nil)
        #expect(r.outcome(of: 39) == .denied && r.outcome(of: 40) == .applied && r.outcome(of: 2) == .applied)
        #expect(r.outcome(of: 46) == nil)
        // A number noted late, below the newest, keeps the newest.
        r.note(43, .applied, at: 90)
        #expect(r.last == 45 && r.outcome(of: 43) == .applied && r.seenAt == 100)
        // Jumps of 1, 31, 32, 33 and 70 numbers age every outcome exactly.
        for jump in [1, 31, 32, 33] as [UInt64] {
            var x = r
            x.note(45 + jump, .applied, at: 200)
            #expect(x.outcome(of: 43) == .applied)
            #expect(x.outcome(of: 45) == .conditionFailed)
            #expect(x.outcome(of: 44) == nil)
            #expect(x.outcome(of: 39) == .denied)
        }
        var far = r
        far.note(45 + 70, .denied, at: 300)
        #expect(far.outcome(of: 45) == .applied && far.outcome(of: 44) == .applied)
        #expect(far.outcome(of: 115) == .denied)
        #expect(WriterTable.Record(text: far.text) == far)
        #expect(WriterTable.Record(text: "1:2:3") == nil)
    }

    @Test func stampsTravelInTheEntryAndUnstampedEntriesKeepTheirBytes() throws {
        let op = WriteOperation.set(path: p("/x"), value: .int(1))
        let plain = LogEntry(index: 3, term: 2, namespace: "t", operation: op, timestamp: 9)
        let stamped = LogEntry(index: 3, term: 2, namespace: "t", operation: op, timestamp: 9, writer: stamp(77, "app-1"))
        #expect(try LogEntry(decoding: stamped.encoded()) == stamped)
        #expect(try LogEntry(decoding: plain.encoded()) == plain)
        // The stamp is a trailer after the unchanged encoding (nodes that predate it ignore it).
        #expect(Array(stamped.encoded().prefix(plain.encoded().count)) == plain.encoded())
        #expect(throws: StorageError.self) { try LogEntry(decoding: plain.encoded() + [9]) }
        #expect(WriterStamp(validating: "ok_-9", seq: 1) != nil)
        #expect(WriterStamp(validating: "", seq: 1) == nil && WriterStamp(validating: "a/b", seq: 1) == nil)
        #expect(WriterStamp(validating: "a", seq: 0) == nil && WriterStamp(validating: String(repeating: "a", count: 65), seq: 1) == nil)
    }
}
