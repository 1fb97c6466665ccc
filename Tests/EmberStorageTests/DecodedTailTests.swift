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
        tail.add([set(5, term: 1, "1"), set(6, term: 1, "2"), set(7, term: 1, "3")])
        #expect(tail.count == 3 && tail.entry(at: 4) == nil && tail.entry(at: 8) == nil)
        #expect(tail.entry(at: 6)?.term == 1)
        // A conflicting suffix from 6 on is replaced by the new entries.
        tail.add([set(6, term: 2, "20")])
        #expect(tail.count == 2 && tail.entry(at: 6)?.term == 2 && tail.entry(at: 7) == nil)
        // Adjacent entries extend the run; past a gap (entries not kept) the run stays as it is,
        // it is still what the log holds there; an earlier start starts it again.
        tail.add([set(7, term: 2, "30")])
        #expect(tail.count == 3)
        tail.add([set(10, term: 2, "10")])
        #expect(tail.count == 3 && tail.entry(at: 7)?.term == 2 && tail.entry(at: 10) == nil)
        tail.add([set(3, term: 3, "11")])
        #expect(tail.count == 1 && tail.entry(at: 7) == nil && tail.entry(at: 3)?.term == 3)
        tail.applied(through: 3)
        #expect(tail.count == 0 && tail.entry(at: 3) == nil)
    }

    /// Past its count the newest are not kept (the kept ones are the next to apply); once those
    /// are applied, entries appended after the gap are kept again.
    @Test func staysWithinItsLimitAndDropsWhatWasApplied() {
        var tail = DecodedTail()
        let n = DecodedTail.maxEntries + 100
        for i in 1...n { tail.add([set(UInt64(i), term: 1, "\(i)")]) }
        #expect(tail.count == DecodedTail.maxEntries)
        #expect(tail.entry(at: 1)?.index == 1 && tail.entry(at: UInt64(DecodedTail.maxEntries))?.index == UInt64(DecodedTail.maxEntries))
        #expect(tail.entry(at: UInt64(DecodedTail.maxEntries + 1)) == nil && tail.entry(at: UInt64(n)) == nil)
        tail.applied(through: UInt64(DecodedTail.maxEntries - 10))
        #expect(tail.count == 10 && tail.entry(at: UInt64(DecodedTail.maxEntries - 10)) == nil)
        #expect(tail.entry(at: UInt64(DecodedTail.maxEntries - 9)) != nil)
        tail.applied(through: UInt64(n))
        #expect(tail.count == 0 && tail.bytes == 0)
        tail.add([set(UInt64(n + 1), term: 1, "0")])
        #expect(tail.count == 1 && tail.entry(at: UInt64(n + 1)) != nil)
    }

    /// A bulk import's multi-MB entries: bounded by their encoded bytes, not only by count. The
    /// first entry is kept whatever its size; a replaced suffix and applied entries give their
    /// bytes back.
    @Test func staysWithinItsByteBound() {
        var tail = DecodedTail()
        let big = DecodedTail.maxBytes / 3 + 1  // two fit, a third does not
        let entries = (1...5).map { set(UInt64($0), term: 1, "\($0)") }
        tail.appended(Array(entries[0..<2]), sizes: [big, big])
        tail.appended(Array(entries[2..<5]), sizes: [big, big, big])
        #expect(tail.count == 2 && tail.bytes == 2 * big)
        #expect(tail.entry(at: 2) != nil && tail.entry(at: 3) == nil && tail.entry(at: 5) == nil)
        // Entry 2 replaced (a new leader's log): its bytes go, the new one is kept in its place.
        tail.appended([set(2, term: 2, "22")], sizes: [10])
        #expect(tail.count == 2 && tail.bytes == big + 10 && tail.entry(at: 2)?.term == 2)
        tail.applied(through: 2)
        #expect(tail.count == 0 && tail.bytes == 0)
        tail.appended([set(3, term: 2, "33")], sizes: [DecodedTail.maxBytes * 2])
        #expect(tail.count == 1 && tail.entry(at: 3)?.term == 2, "the next to apply is kept whatever its size")
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

extension DecodedTail {
    /// `appended` with each entry's encoded size.
    mutating func add(_ new: [LogEntry]) { appended(new, sizes: new.map { $0.encodedSize() }) }
}
