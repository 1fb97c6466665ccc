import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// `appendAndApply`: a Raft host's turn (append the new entries, apply the committed ones) in
/// one transaction, i.e. one fsync.
@Suite struct AppendAndApplyTests {
    @Test func appendsAndAppliesInOneCommitAndMatchesTheLeader() async throws {
        let leader = try openStore()
        try await leader.setHardState(HardState(term: 2, votedFor: "n1"))
        for i in 0..<10 { try await leader.set("/r/\(i)", "\(i)") }
        let es = try leader.entries(from: 1)
        let f = try openStore()
        try await f.append(entries: Array(es[0..<3]))
        let before = f.metrics.commits
        // Applies the 3 already in the log plus 2 of the 4 appended now.
        let results = try await f.appendAndApply(entries: Array(es[3..<7]), through: 5)
        #expect(results.map(\.index) == [1, 2, 3, 4, 5])
        #expect(f.metrics.commits == before + 1)
        #expect(f.appliedIndex == 5 && f.lastLogIndex == 7)
        #expect(try f.get("/r/4") == n("4") && f.get("/r/5") == .empty)
        // A conflicting unapplied suffix is replaced; applied entries cannot be.
        let other = LogEntry(index: 6, term: 3, namespace: "t", operation: .noop, timestamp: 0)
        try await f.appendAndApply(entries: [other], through: 5)
        #expect(f.lastLogIndex == 6 && f.lastLogTerm == 3)
        await #expect(throws: StorageError.self) { try await f.appendAndApply(entries: [es[4]], through: 5) }
        await #expect(throws: StorageError.self) { try await f.appendAndApply(entries: [es[8]], through: 9) }  // gap
        #expect(f.appliedIndex == 5 && f.lastLogIndex == 6)
        // Back to the leader's log.
        try await f.appendAndApply(entries: Array(es[5...]), through: 100)
        #expect(f.appliedIndex == 10)
        #expect(try f.stateHash() == leader.stateHash())
    }

    @Test func survivesRestart() async throws {
        let dir = tempDir()
        let entries = (1...4).map { i in
            LogEntry(index: UInt64(i), term: 1, namespace: "t",
                     operation: .set(path: p("/k\(i)"), value: j("\(i)"), condition: nil), timestamp: 0)
        }
        do {
            let s = try openStore(dir)
            try await s.appendAndApply(entries: entries, through: 3)
        }
        let s = try openStore(dir)
        #expect(s.appliedIndex == 3 && s.lastLogIndex == 4)
        #expect(try s.get("/k3") == n("3") && s.get("/k4") == .empty)
    }
}
