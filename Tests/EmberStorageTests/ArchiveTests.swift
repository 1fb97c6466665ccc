import EmberCore
import EmberTestSupport
import Foundation
import Synchronization
import Testing
@testable import EmberStorage

/// The point-in-time archive's pure parts (segment format, catalog, retention, time) and a
/// restore through a real LMDB store from a real archive directory.
@Suite struct ArchiveFormatTests {
    func entry(_ i: UInt64, ts: Int64, _ op: WriteOperation = .set(path: .root, value: .int(1))) -> (index: UInt64, bytes: [UInt8]) {
        (i, LogEntry(index: i, term: 1, namespace: "t", operation: op, timestamp: ts).encoded())
    }

    @Test func segmentRoundTripsWithItsRangeTimesAndHash() throws {
        let entries = (5...9).map { entry($0, ts: 1_000 + Int64($0)) } + [entry(10, ts: 0, .noop)]
        let s = try ArchiveSegment(entries: entries, stateHash: "abc123")
        #expect(s.first == 5 && s.last == 10 && s.firstTimestamp == 1_005 && s.lastTimestamp == 1_009)
        #expect(s.name == "seg-00000000000000000005-00000000000000000010-000000000001005-000000000001009.ems")
        let back = try ArchiveSegment(decoding: s.encoded())
        #expect(back == s)
        #expect(try back.decodedEntries().map(\.index) == Array(5...10))
    }

    /// Segments are written deflated (format 2); the uncompressed format 0.6.0 wrote (1) stays readable.
    @Test func compressedAndUncompressedSegmentsBothDecode() throws {
        let entries = (1...200).map { i in
            entry(UInt64(i), ts: 1_700_000_000_000 + Int64(i),
                  .update(path: p("/users/u\(i % 17)"), values: [(p("name"), .string("user \(i)")), (p("score"), .int(Int64(i * 7)))]))
        }
        let s = try ArchiveSegment(entries: entries, stateHash: "h")
        let v2 = s.encoded(), v1 = s.encoded(compressed: false)
        #expect(v2[8] == 2 && v1[8] == 1)
        #expect(try ArchiveSegment(decoding: v2) == s)
        #expect(try ArchiveSegment(decoding: v1) == s)
        let raw = entries.reduce(0) { $0 + $1.bytes.count }
        #expect(v1.count > raw && v2.count * 3 < v1.count, "\(raw) bytes of entries: \(v1.count) stored, \(v2.count) compressed")
        // A block that does not inflate to its recorded size (checksum recomputed) is refused.
        var bad = v2
        bad.removeLast(20)
        let sizeAt = 8 + 1 + 40 + 1 + 1 + "h".utf8.count
        bad[sizeAt + 7] &+= 1
        bad += SHA1.digest(bad)
        #expect(throws: ArchiveError.self) { try ArchiveSegment(decoding: bad) }
    }

    @Test(arguments: [true, false]) func everyAlteredByteIsFound(compressed: Bool) throws {
        let bytes = try ArchiveSegment(entries: (1...3).map { entry($0, ts: 7) }, stateHash: "h").encoded(compressed: compressed)
        for i in 0..<bytes.count {
            var bad = bytes
            bad[i] ^= 0x01
            #expect(throws: ArchiveError.self) { try ArchiveSegment(decoding: bad) }
        }
        #expect(throws: ArchiveError.self) { try ArchiveSegment(decoding: Array(bytes.dropLast())) }
    }

    @Test func entriesMustBeConsecutive() {
        #expect(throws: ArchiveError.self) { try ArchiveSegment(entries: [entry(1, ts: 1), entry(3, ts: 2)], stateHash: "") }
        #expect(throws: ArchiveError.self) { try ArchiveSegment(entries: [], stateHash: "") }
    }

    func seg(_ f: UInt64, _ l: UInt64, _ ft: Int64, _ lt: Int64) -> String {
        ArchiveName.segment(first: f, last: l, firstTimestamp: ft, lastTimestamp: lt)
    }

    @Test func catalogFindsGapsOverlapsAndWindows() {
        let names = [ArchiveName.base(index: 0, timestamp: 0), seg(1, 10, 100, 200), seg(11, 20, 210, 300), seg(31, 40, 500, 600),
                     ArchiveName.base(index: 30, timestamp: 450), "junk.txt", ".partial-x"]
        let c = ArchiveCatalog(names: names)
        #expect(c.segments.count == 3 && c.bases.count == 2)
        #expect(c.gaps == [ArchiveCatalog.Gap(from: 21, to: 30)])
        #expect(c.overlaps.isEmpty)
        #expect(c.windows.map(\.endIndex) == [20, 40])
        let o = ArchiveCatalog(names: [seg(1, 10, 1, 2), seg(5, 12, 1, 3)])
        #expect(o.overlaps.count == 1 && o.gaps.isEmpty)
    }

    /// Entries held twice: a segment the others cover (together or alone) is removed, the
    /// longest first; a partial overlap is trimmed off the later segment; nothing else changes.
    @Test func cleanupRemovesCoveredSegmentsAndTrimsPartialOverlaps() {
        let a = seg(100, 350, 1, 35), b1 = seg(100, 300, 1, 30), b2 = seg(301, 500, 31, 50), inner = seg(120, 130, 12, 13)
        func plan(_ names: [String]) -> (remove: [String], trim: [String: UInt64]) {
            let c = ArchiveCatalog(names: names).cleanup
            return (c.remove.map(\.name), Dictionary(uniqueKeysWithValues: c.trim.map { ($0.segment.name, $0.from) }))
        }
        #expect(ArchiveCatalog(names: [seg(1, 99, 0, 9), b1, b2]).cleanup.isEmpty)
        // Covered by two together: the longer one goes, not the one inside it.
        #expect(plan([b1, a, b2]).remove == [a] && plan([b1, a, b2]).trim.isEmpty)
        // Neither covers the other: the later one starts after the earlier one's end.
        #expect(plan([a, b2]).remove.isEmpty && plan([a, b2]).trim == [b2: 351])
        // Inside one: removed; inside and then a partial overlap: both.
        #expect(plan([b1, inner]).remove == [inner] && plan([b1, inner]).trim.isEmpty)
        #expect(plan([b1, inner, seg(250, 400, 25, 40)]).remove == [inner] && plan([b1, inner, seg(250, 400, 25, 40)]).trim == [seg(250, 400, 25, 40): 301])
        // What the plan leaves holds every index once.
        for names in [[b1, a, b2], [a, b2], [b1, inner, seg(250, 400, 25, 40)], [a, b1, b2, inner, seg(290, 320, 29, 32)]] {
            let c = ArchiveCatalog(names: names)
            let p = c.cleanup
            var ranges = c.segments.filter { s in !p.remove.contains(s) }.map { s in (s.first, s.last) }
            for t in p.trim { ranges = ranges.map { $0 == (t.segment.first, t.segment.last) ? (t.from, $0.1) : $0 } }
            ranges.sort { $0.0 < $1.0 }
            #expect(ranges.first?.0 == c.segments.first?.first && ranges.map(\.1).max() == c.segments.map(\.last).max())
            for (x, y) in zip(ranges, ranges.dropFirst()) { #expect(y.0 == x.1 + 1, "\(names): \(ranges)") }
        }
    }

    @Test func planTakesTheNewestBaseAtOrBeforeTheTargetAndRefusesOutsideOrAcrossAGap() throws {
        let c = ArchiveCatalog(names: [ArchiveName.base(index: 0, timestamp: 0), ArchiveName.base(index: 15, timestamp: 250),
                                       seg(1, 10, 100, 200), seg(11, 20, 210, 300), seg(31, 40, 500, 600)])
        let p1 = try c.plan(.index(12))
        #expect(p1.base.first == 0 && p1.segments.map(\.first) == [1, 11])
        let p2 = try c.plan(.index(18))
        #expect(p2.base.first == 15 && p2.segments.map(\.first) == [11])
        let p3 = try c.plan(.time(205))
        #expect(p3.base.first == 0 && p3.segments.map(\.first) == [1, 11])
        // Entries 21...30 are missing and may carry time 300 too: refused rather than guessed.
        #expect(throws: ArchiveError.self) { try c.plan(.time(300)) }
        // Past index 20 a gap: never an older state instead.
        #expect(throws: ArchiveError.self) { try c.plan(.index(25)) }
        #expect(throws: ArchiveError.self) { try c.plan(.index(35)) }
        #expect(throws: ArchiveError.self) { try c.plan(.time(400)) }
        let noBase = ArchiveCatalog(names: [seg(1, 10, 100, 200)])
        #expect(throws: ArchiveError.self) { try noBase.plan(.index(5)) }
        let late = ArchiveCatalog(names: [ArchiveName.base(index: 10, timestamp: 200), seg(11, 20, 210, 300)])
        #expect(throws: ArchiveError.self) { try late.plan(.index(5)) }
        #expect(throws: ArchiveError.self) { try late.plan(.time(150)) }
        #expect(throws: ArchiveError.self) { try late.plan(.time(301)) }
        // The archive's last entry time is inside it.
        #expect(try late.plan(.time(300)).segments.map(\.last) == [20])
        // Overlapping segments (a crash between a store and its mark) still chain.
        let overlap = ArchiveCatalog(names: [ArchiveName.base(index: 0, timestamp: 0), seg(1, 10, 1, 2), seg(5, 12, 1, 3), seg(13, 14, 4, 5)])
        #expect(try overlap.plan(.index(14)).segments.map(\.first) == [1, 5, 13])
    }

    @Test func retentionKeepsTheNewestBaseBeforeTheWindowAndWhatFollowsIt() throws {
        let day: Int64 = 86_400_000
        let names = [ArchiveName.base(index: 0, timestamp: 1 * day), seg(1, 10, 1 * day, 2 * day),
                     ArchiveName.base(index: 10, timestamp: 2 * day), seg(11, 20, 2 * day, 4 * day),
                     ArchiveName.base(index: 20, timestamp: 4 * day), seg(21, 30, 4 * day, 9 * day)]
        let c = ArchiveCatalog(names: names)
        // Window of 5 days at day 8: starts at day 3; the newest base before it is index 10's.
        let expired = Set(c.expired(now: 8 * day, retentionMs: 5 * day))
        #expect(expired == [names[0], names[1]])
        let left = ArchiveCatalog(names: names.filter { !expired.contains($0) })
        #expect(try left.plan(.time(3 * day)).base.first == 10)
        // No base old enough: nothing goes.
        #expect(c.expired(now: 2 * day, retentionMs: 5 * day).isEmpty)
        // Far later: only the last base and its segment stay.
        #expect(Set(c.expired(now: 100 * day, retentionMs: day)) == Set(names[0..<4]))
    }

    @Test func timesParseAndFormatRFC3339() {
        #expect(ArchiveTime.parse("2026-11-28T12:34:56.789Z") == 1_795_869_296_789)
        #expect(ArchiveTime.format(1_795_869_296_789) == "2026-11-28T12:34:56.789Z")
        #expect(ArchiveTime.parse("2026-11-28T13:34:56.789+01:00") == 1_795_869_296_789)
        #expect(ArchiveTime.parse("2026-11-28T12:34:56Z") == 1_795_869_296_000)
        #expect(ArchiveTime.parse("1970-01-01T00:00:00.000Z") == 0)
        for bad in ["2026-11-28", "2026-13-01T00:00:00Z", "2026-11-28T12:34:56.Z", "2026-11-28T12:34:56.789", "x"] {
            #expect(ArchiveTime.parse(bad) == nil)
        }
        var g = SplitMix64(seed: 37)
        for _ in 0..<200 {
            let t = Int64.random(in: 0...4_102_444_800_000, using: &g)
            #expect(ArchiveTime.parse(ArchiveTime.format(t)) == t)
        }
    }
}

@Suite struct ArchiveStoreTests {
    /// Every kind of write, the state hash after each, an archive of segments and two bases in a
    /// real directory, then restores to every index: equal hash and data.
    @Test func restoreToAnyIndexReproducesTheStateThere() async throws {
        var o = smallOptions()
        o.logRetention = 0
        o.archiveHold = 1_000
        let a = try openStore(tempDir(), o)
        defer { a.close() }
        let dir = try DirectoryArchiveStore(directory: tempDir() + "/archive")
        var hashes: [UInt64: String] = [:]
        func record() throws { hashes[a.appliedIndex] = try a.stateHash() }
        try record()
        try dir.putFile(ArchiveName.base(index: 0, timestamp: 0), from: { let f = tempDir() + "/b0"; _ = try a.writeBackup(to: f); return f }())
        let ops: [WriteOperation] = [
            .set(path: p("/a"), value: j(#"{"x":1,"y":"s"}"#)),
            .update(path: p("/a"), values: [(p("z"), j("true")), (p("x"), .null)]),
            .set(path: p("/c/n"), value: j(#"{".sv":{"increment":5}}"#)),
            .set(path: p("/c/n"), value: j(#"{".sv":{"increment":2}}"#)),
            .set(path: p("/ts"), value: j(#"{".sv":"timestamp"}"#)),
            .set(path: p("/c/n"), value: j("7"), condition: .ifVersion(1)),  // fails: the version moved
            .setRules(text: #"{"rules":{".read":true,".write":true,"items":{".indexOn":["n"]}}}"#),
            .set(path: p("/items/k"), value: j(#"{"n":3}"#)),
            .set(path: p("/a"), value: .null),
            // A mark replays too (through 0: it lets compaction drop nothing this test reads).
            .archived(through: 0),
        ]
        for op in ops {
            try await a.submit(namespace: "t", op)
            try record()
        }
        let base2 = tempDir() + "/b5"
        try await a.submit(namespace: "t", .set(path: p("/late"), value: j("1")))
        try record()
        let summary = try a.writeBackup(to: base2)
        try dir.putFile(ArchiveName.base(index: summary.appliedIndex, timestamp: summary.lastTimestamp), from: base2)
        for i in 0..<20 {
            try await a.submit(namespace: "t", .set(path: p("/more/\(i)"), value: .int(Int64(i))))
            try record()
        }
        // The log still holds every entry: the archive marked only through 2, so nothing is compacted past it.
        let last = a.appliedIndex
        let all = try a.encodedEntries(from: 1, through: last, maxCount: 1_000)
        #expect(all.map(\.index) == Array(1...last))
        for chunk in stride(from: 0, to: all.count, by: 7) {
            let part = Array(all[chunk..<min(all.count, chunk + 7)])
            let s = try ArchiveSegment(entries: part, stateHash: hashes[part.last!.index]!)
            try dir.put(s.name, bytes: s.encoded())
        }
        #expect(try ArchiveRestore.verify(dir).problems.isEmpty)
        for target in 0...last {
            let b = try openStore()
            defer { b.close() }
            let r = try await ArchiveRestore.restore(from: dir, to: .index(target), into: b, scratchFile: tempDir() + "/scratch")
            #expect(r.index == target)
            #expect(try b.stateHash() == hashes[target], "index \(target)")
            // The segments end at every 7th index and at the last: there the recorded hash is checked.
            #expect(r.hashVerified == (target > 0 && (target % 7 == 0 || target == last)), "index \(target)")
        }
        let b = try openStore()
        defer { b.close() }
        // Each segment of the plan is fetched (and decoded) once, the base once.
        let counted = CountingArchiveStore(dir)
        _ = try await ArchiveRestore.restore(from: counted, to: .index(last), into: b, scratchFile: tempDir() + "/scratch")
        let fetched = counted.fetched.withLock { $0 }
        let plan = try ArchiveCatalog(names: dir.list()).plan(.index(last))
        #expect(plan.segments.count >= 2)
        #expect(fetched == Dictionary(uniqueKeysWithValues: (plan.segments.map(\.name) + [plan.base.name]).map { ($0, 1) }))
        #expect(try b.get("/c/n") == n("7"))
        #expect(try b.get("/a").isEmpty)
        #expect(try b.get("/ts") == a.get("/ts"))
        #expect(try b.storedRules(namespace: "t") != nil)
        #expect(try b.get("/more/19") == n("19"))
        // Past the end: refused.
        let c = try openStore()
        defer { c.close() }
        await #expect(throws: ArchiveError.self) {
            _ = try await ArchiveRestore.restore(from: dir, to: .index(last + 1), into: c, scratchFile: tempDir() + "/scratch")
        }
        #expect(c.appliedIndex == 0)
    }

    /// The whole segment's checksum is checked before any of its entries is applied.
    @Test func aCorruptSegmentFailsTheRestoreBeforeAnyOfItsEntries() async throws {
        let a = try openStore()
        defer { a.close() }
        let dir = try DirectoryArchiveStore(directory: tempDir() + "/archive")
        let f = tempDir() + "/b0"
        _ = try a.writeBackup(to: f)
        try dir.putFile(ArchiveName.base(index: 0, timestamp: 0), from: f)
        for i in 0..<10 { try await a.set("/k\(i)", "\(i)") }
        let s = try ArchiveSegment(entries: try a.encodedEntries(from: 1, through: 10, maxCount: 100), stateHash: try a.stateHash())
        var bytes = s.encoded()
        bytes[bytes.count / 2] ^= 0x40
        try dir.put(s.name, bytes: bytes)
        let problems = try ArchiveRestore.verify(dir).problems
        #expect(problems.count == 1 && problems[0].contains(s.name))
        let b = try openStore()
        defer { b.close() }
        await #expect(throws: ArchiveError.self) {
            _ = try await ArchiveRestore.restore(from: dir, to: .index(5), into: b, scratchFile: tempDir() + "/scratch")
        }
        #expect(b.appliedIndex == 0)
    }

    @Test func compactionKeepsWhatTheArchiveLacksUpToTheHold() async throws {
        var o = smallOptions()
        o.logRetention = 0
        o.archiveHold = 50
        let a = try openStore(tempDir(), o)
        defer { a.close() }
        for i in 0..<30 { try await a.set("/k\(i)", "\(i)") }
        #expect(a.firstLogIndex == 1)
        try await a.submit(namespace: "t", .archived(through: 20))
        #expect(try a.archivedThrough() == 20)
        try await a.set("/x", "1")
        #expect(a.firstLogIndex == 21)
        // A lower mark changes nothing.
        try await a.submit(namespace: "t", .archived(through: 3))
        #expect(try a.archivedThrough() == 20)
        // Past the hold the log is compacted anyway (the archiver reports the gap).
        for i in 0..<80 { try await a.set("/y\(i)", "\(i)") }
        #expect(a.firstLogIndex > 21)
        #expect(a.appliedIndex - a.firstLogIndex + 1 <= 51)
    }
}

/// An archive that counts how often each object is read (a restore reads each once).
final class CountingArchiveStore: ArchiveStore, Sendable {
    let inner: DirectoryArchiveStore
    let fetched = Mutex<[String: Int]>([:])
    init(_ inner: DirectoryArchiveStore) { self.inner = inner }
    func count(_ name: String) { fetched.withLock { $0[name, default: 0] += 1 } }
    func put(_ name: String, bytes: [UInt8]) throws { try inner.put(name, bytes: bytes) }
    func putFile(_ name: String, from path: String) throws { try inner.putFile(name, from: path) }
    func list() throws -> [String] { try inner.list() }
    func get(_ name: String) throws -> [UInt8] { count(name); return try inner.get(name) }
    func getFile(_ name: String, to path: String) throws { count(name); try inner.getFile(name, to: path) }
    func delete(_ name: String) throws { try inner.delete(name) }
    var location: String { inner.location }
}

/// The archiver's open segment (`ArchiveSegmentBuilder`: each entry copied once, from the log's
/// pages into the segment's block) against `ArchiveSegment`, the encoder archives were written
/// with before it: the same bytes for the same entries, so archives of either restore alike.
@Suite(.printsSeedOnFailure) struct ArchiveSegmentBuilderTests {
    static func randomEntries(_ g: inout SplitMix64, from first: UInt64, count: Int) -> [(index: UInt64, bytes: [UInt8])] {
        (0..<count).map { k in
            let i = first + UInt64(k)
            // Raft no-ops and marks carry no time (0); the others a leader-fixed one, not always rising.
            let ts: Int64 = Int.random(in: 0..<8, using: &g) == 0 ? 0 : 1_700_000_000_000 + Int64.random(in: 0...10_000, using: &g)
            let op: WriteOperation
            switch Int.random(in: 0..<5, using: &g) {
            case 0: op = .noop
            case 1: op = .archived(through: UInt64.random(in: 0...i, using: &g))
            case 2: op = .set(path: p("/k/\(randomKey(&g))"), value: .null)
            default:
                let size = Int.random(in: 0...(Int.random(in: 0..<10, using: &g) == 0 ? 5_000 : 40), using: &g)
                op = .set(path: p("/k/\(randomKey(&g))"), value: .string(String(repeating: "v", count: size)))
            }
            return (i, LogEntry(index: i, term: 3, namespace: "t", operation: op, timestamp: ts).encoded())
        }
    }

    @Test func theBuilderEncodesTheSegmentTheEntriesMake() throws {
        var g = TestSeed.generator(0xA37)
        for round in 0..<40 {
            let entries = Self.randomEntries(&g, from: UInt64.random(in: 1...1_000_000, using: &g), count: Int.random(in: 1...300, using: &g))
            var b = ArchiveSegmentBuilder()
            for e in entries { try b.append(index: e.index, e.bytes) }
            let hash = round % 3 == 0 ? "" : String(repeating: "ab", count: 20)
            let old = try ArchiveSegment(entries: entries, stateHash: hash)
            #expect(b.name == old.name && b.count == entries.count && b.last == old.last)
            #expect(b.entryBytes == entries.reduce(0) { $0 + $1.bytes.count })
            #expect(b.encoded(stateHash: hash) == old.encoded(), "round \(round)")
            #expect(b.encoded(stateHash: hash, compressed: false) == old.encoded(compressed: false), "round \(round)")
            #expect(try ArchiveSegment(decoding: b.encoded(stateHash: hash)) == old)
            #expect(b.entries.map(\.index) == entries.map(\.index) && b.entries.map(\.bytes) == entries.map(\.bytes))
            // Trimmed in front (another writer stored those): the segment of the rest.
            let cut = entries[Int.random(in: 0..<entries.count, using: &g)].index
            var trimmed = b
            trimmed.removeThrough(cut)
            let rest = entries.filter { $0.index > cut }
            if rest.isEmpty {
                #expect(trimmed.isEmpty)
            } else {
                #expect(trimmed.encoded(stateHash: hash) == (try ArchiveSegment(entries: rest, stateHash: hash)).encoded())
            }
            // Reset: the next segment starts empty, with nothing of the last one.
            b.reset()
            #expect(b.isEmpty && b.entryBytes == 0 && b.last == nil)
            try b.append(index: entries[0].index, entries[0].bytes)
            #expect(b.encoded(stateHash: hash) == (try ArchiveSegment(entries: [entries[0]], stateHash: hash)).encoded())
        }
    }

    @Test func theBuilderRefusesAGapAndWhatIsNoEntry() throws {
        var g = TestSeed.generator(0xA38)
        let entries = Self.randomEntries(&g, from: 5, count: 3)
        var b = ArchiveSegmentBuilder()
        try b.append(index: 5, entries[0].bytes)
        #expect(throws: ArchiveError.self) { try b.append(index: 7, entries[2].bytes) }
        #expect(throws: ArchiveError.self) { try b.append(index: 6, [9, 9, 9]) }
        #expect(b.count == 1)
    }

    /// Read from a real store's log: what `encodedEntries` returns, bounded by count and bytes,
    /// and stopping at an entry compaction removed.
    @Test func entriesAppendFromTheLogAsStored() async throws {
        var o = StoreOptions()
        o.logRetention = 0
        o.archiveHold = 100
        let store = try EmberStore(directory: TestDirectory.root + "ember-builder-\(UUID().uuidString)", options: o)
        defer { store.close() }
        for i in 0..<50 { _ = try await store.submit(namespace: "t", .set(path: p("/a\(i)"), value: .string(String(repeating: "x", count: i)))) }
        let stored = try store.encodedEntries(from: 1, through: 50, maxCount: 100)
        #expect(stored.count == 50)
        var b = ArchiveSegmentBuilder()
        var seen: [UInt64] = []
        let first = try store.appendEncodedEntries(from: 1, through: 20, maxCount: 100, into: &b) { i, _ in seen.append(i) }
        let second = try store.appendEncodedEntries(from: 21, through: 50, maxCount: 7, into: &b)
        #expect(first == 20 && second == 7)
        #expect(seen == Array(1...20))
        let bytesBefore = b.entryBytes
        // Bounded by bytes: stops at the entry that reaches them.
        let n = try store.appendEncodedEntries(from: 28, through: 50, maxCount: 100, maxBytes: bytesBefore + 1, into: &b)
        #expect(n == 1)
        #expect(b.entries.map(\.bytes) == stored.prefix(28).map(\.bytes))
        #expect(b.encoded(stateHash: "") == (try ArchiveSegment(entries: Array(stored.prefix(28)), stateHash: "")).encoded())
        // Nothing past `through`, nothing that is not the next index.
        var c = ArchiveSegmentBuilder()
        let none = try store.appendEncodedEntries(from: 60, through: 70, maxCount: 10, into: &c)
        #expect(none == 0)
        // Compacted (the archive's mark, then writes past the hold): the first index is gone.
        _ = try await store.submit(namespace: "t", .archived(through: 40))
        for i in 0..<600 { _ = try await store.submit(namespace: "t", .set(path: p("/b\(i)"), value: .int(Int64(i)))) }
        #expect(store.firstLogIndex > 1)
        let compacted = try store.appendEncodedEntries(from: 1, through: 50, maxCount: 10, into: &c)
        #expect(compacted == 0 && c.isEmpty)
    }
}
