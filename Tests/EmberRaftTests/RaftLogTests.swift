// The in-memory log view: indexing around snapshots, truncation, compaction and size limits.

@testable import EmberRaft
import Testing

@Suite struct RaftLogTests {
    private func log(_ terms: [UInt64]) -> RaftLog {
        let s = persisted(voters: ["n1"], terms: terms)
        return RaftLog(snapshot: s.snapshot, entries: s.entries)
    }

    @Test func indexesAndTerms() {
        let l = log([1, 1, 2, 3])
        #expect(l.firstIndex == 1 && l.lastIndex == 4 && l.lastTerm == 3)
        #expect(l.term(at: 0) == 0 && l.term(at: 3) == 2 && l.term(at: 5) == nil)
        #expect(l.firstIndexOfTerm(at: 2) == 1)
        #expect(l.lastIndex(withTermAtMost: 2, from: 4) == 3)
    }

    @Test func truncateAndAppendReplacesSuffix() {
        var l = log([1, 1, 2, 2])
        l.truncateAndAppend([LogEntry(index: 3, term: 3), LogEntry(index: 4, term: 3), LogEntry(index: 5, term: 3)])
        #expect(l.entries.map(\.term) == [1, 1, 3, 3, 3])
    }

    @Test func compactionKeepsTermOfSnapshotIndex() {
        var l = log([1, 1, 2, 2])
        let snap = SnapshotMetadata(index: 3, term: 2, membership: Membership(voters: ["n1"]))
        l.compact(to: snap)
        #expect(l.snapshotIndex == 3 && l.firstIndex == 4 && l.lastIndex == 4)
        #expect(l.term(at: 3) == 2 && l.term(at: 2) == nil && l.entry(at: 3) == nil)
    }

    @Test func entriesRespectCountAndByteLimits() {
        var s = PersistentState.bootstrap(voters: ["n1"])
        s.entries = (1...10).map { LogEntry(index: UInt64($0), term: 1, data: Array(repeating: 0, count: 100)) }
        let l = RaftLog(snapshot: s.snapshot, entries: s.entries)
        #expect(l.entries(from: 1, maxCount: 3, maxBytes: 1 << 20).count == 3)
        #expect(l.entries(from: 1, maxCount: 100, maxBytes: 300).count == 2)  // 124 bytes each
        #expect(l.entries(from: 1, maxCount: 100, maxBytes: 1).count == 1)  // always progress
        #expect(l.entries(from: 11, maxCount: 3, maxBytes: 1000).isEmpty)
    }

    @Test func upToDateComparison() {
        let l = log([1, 2, 2])
        #expect(l.isUpToDate(lastIndex: 3, lastTerm: 2))
        #expect(l.isUpToDate(lastIndex: 1, lastTerm: 3))
        #expect(!l.isUpToDate(lastIndex: 2, lastTerm: 2))
        #expect(!l.isUpToDate(lastIndex: 9, lastTerm: 1))
    }

    @Test func membershipFollowsLatestConfigEntry() {
        var l = log([1, 1])
        let m = Membership(voters: ["n1", "n2"])
        l.truncateAndAppend([LogEntry(index: 3, term: 1, kind: .configChange, data: m.encoded()), LogEntry(index: 4, term: 1)])
        #expect(l.membership(at: 4) == m)
        #expect(l.membership(at: 2) == Membership(voters: ["n1"]))
        #expect(l.lastConfigIndex(atOrBefore: 4) == 3)
    }

    /// `byteCount` is the retained entries' sizes summed through appends, truncations,
    /// compactions and restores (seeded random sequence, replayable).
    @Test func byteCountFollowsEveryChange() {
        var rng = SplitMix64(seed: 42)
        var s = PersistentState.bootstrap(voters: ["n1"])
        s.entries = (1...5).map { LogEntry(index: UInt64($0), term: 1, data: Array(repeating: 0, count: $0 * 10)) }
        var l = RaftLog(snapshot: s.snapshot, entries: s.entries)
        func expectSum() { #expect(l.byteCount == l.entries.reduce(0) { $0 + $1.approximateSize }) }
        expectSum()
        var term: UInt64 = 1
        for _ in 0..<500 {
            switch rng.next() % 4 {
            case 0, 1:
                // Append at or before the end (a follower's overwrite of a conflicting suffix).
                let from = l.firstIndex + rng.next() % (l.lastIndex + 2 - l.firstIndex)
                term += 1
                l.truncateAndAppend((0..<Int(rng.next() % 4 + 1)).map {
                    LogEntry(index: from + UInt64($0), term: term, data: Array(repeating: 1, count: Int(rng.next() % 5_000)))
                })
            case 2:
                guard l.lastIndex > l.snapshotIndex else { continue }
                let to = l.snapshotIndex + 1 + rng.next() % (l.lastIndex - l.snapshotIndex)
                l.compact(to: SnapshotMetadata(index: to, term: l.term(at: to)!, membership: l.membership(at: to)))
            default:
                if rng.next() % 10 == 0 {
                    l.restore(SnapshotMetadata(index: l.lastIndex + 3, term: term, membership: l.snapshot.membership))
                }
            }
            expectSum()
        }
    }
}

