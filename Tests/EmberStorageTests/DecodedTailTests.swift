import EmberCore
import Testing
@testable import EmberStorage

/// Appended entries are applied from their decoded form (`DecodedTail`) — which must always be
/// the entry the log holds at that index.
@Suite struct DecodedTailTests {
    func set(_ index: UInt64, term: UInt64, _ value: String) -> LogEntry {
        LogEntry(index: index, term: term, namespace: "t", operation: .set(path: p("/k"), value: j(value), condition: nil), timestamp: 0)
    }

    @Test func keepsAContiguousRunAndReplacesConflictingSuffixes() {
        var tail = DecodedTail()
        tail.appended([set(5, term: 1, "1"), set(6, term: 1, "2"), set(7, term: 1, "3")])
        #expect(tail.count == 3 && tail.entry(at: 4) == nil && tail.entry(at: 8) == nil)
        #expect(tail.entry(at: 6)?.term == 1)
        // A conflicting suffix from 6 on is replaced by the new entries.
        tail.appended([set(6, term: 2, "20")])
        #expect(tail.count == 2 && tail.entry(at: 6)?.term == 2 && tail.entry(at: 7) == nil)
        // Adjacent entries extend the run; a gap or an earlier start starts it again.
        tail.appended([set(7, term: 2, "30")])
        #expect(tail.count == 3)
        tail.appended([set(10, term: 2, "10")])
        #expect(tail.count == 1 && tail.entry(at: 7) == nil && tail.entry(at: 10) != nil)
        tail.appended([set(3, term: 3, "11")])
        #expect(tail.count == 1 && tail.entry(at: 10) == nil && tail.entry(at: 3)?.term == 3)
        tail.applied(through: 3)
        #expect(tail.count == 0 && tail.entry(at: 3) == nil)
    }

    @Test func staysWithinItsLimitAndDropsWhatWasApplied() {
        var tail = DecodedTail()
        let n = DecodedTail.maxEntries + 100
        for i in 1...n { tail.appended([set(UInt64(i), term: 1, "\(i)")]) }
        #expect(tail.count == DecodedTail.maxEntries)
        #expect(tail.entry(at: 100) == nil && tail.entry(at: 101)?.index == 101 && tail.entry(at: UInt64(n)) != nil)
        tail.applied(through: UInt64(n - 10))
        #expect(tail.count == 10 && tail.entry(at: UInt64(n - 10)) == nil && tail.entry(at: UInt64(n - 9)) != nil)
    }

    /// Through the store: entries appended in one turn and applied in a later one, with the
    /// unapplied suffix replaced in between (a new leader's log), apply as the log holds them.
    @Test func theStoreAppliesWhatTheLogHoldsAfterASuffixIsReplaced() async throws {
        let dir = tempDir()
        do {
            let s = try openStore(dir)
            try await s.append(entries: [set(1, term: 1, "1"), set(2, term: 1, "2"), set(3, term: 1, "3")])
            #expect(try await s.appendAndApply(entries: [], through: 1).map(\.term) == [1])
            #expect(try s.get("/k") == n("1"))
            try await s.append(entries: [set(2, term: 2, "20")])
            let results = try await s.appendAndApply(entries: [set(3, term: 2, "30"), set(4, term: 2, "40")], through: 2)
            #expect(results.map(\.index) == [2] && results.map(\.term) == [2])
            #expect(try s.get("/k") == n("20"))
            #expect(try await s.appendAndApply(entries: [], through: 3).map(\.term) == [2])
            #expect(try s.get("/k") == n("30"))
        }
        // Reopened, nothing is kept: the rest is read from the log.
        let s = try openStore(dir)
        #expect(s.appliedIndex == 3 && s.lastLogIndex == 4)
        #expect(try await s.appendAndApply(entries: [], through: 4).map(\.term) == [2])
        #expect(try s.get("/k") == n("40"))
    }
}
