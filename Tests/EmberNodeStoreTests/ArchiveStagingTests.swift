import EmberCore
import Foundation
import Logging
import Testing
#if canImport(Glibc)
import Glibc
#endif

@testable import EmberNodeStore
@testable import EmberStorage

/// A single node's archive staging (`StagingLog`): what a kill -9 leaves in it, at each point
/// of a batch, becomes an archive without gap or duplicate whose restore is exact; a former
/// version's LMDB log rows move into it.
@Suite struct ArchiveStagingTests {
    static func options(staging: Bool = true) -> StoreOptions {
        var o = StoreOptions()
        o.mapSize = 1 << 30
        o.logRetention = 0
        o.archiveHold = 10_000
        o.archiveStaging = staging
        return o
    }

    static func directory() -> String { NSTemporaryDirectory() + "ember-staging-\(UUID().uuidString)" }

    static func lastSegmentFile(_ dir: String) throws -> String {
        let stage = dir + "/" + StagingLog.directoryName
        let last = try #require(try StagingLog.listSegments(stage).last)
        return stage + "/" + StagingLog.name(last)
    }

    /// Where a staging file's records end (zeros written ahead follow them).
    static func recordsEnd(_ file: String) throws -> Int {
        let fd = open(file, O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        var end = 0
        try StagingLog.scan(fd, from: 0, maxEntryBytes: StoreOptions().maxEntryBytes) { _, _, next in end = next; return true }
        return end
    }

    static func write(_ file: String, at offset: Int, _ bytes: [UInt8]) throws {
        let fd = open(file, O_WRONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        #expect(bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) } == bytes.count)
    }

    /// A staging file's records as `StagingSync` writes them (valid checksums).
    static func records(_ entries: [(index: UInt64, bytes: [UInt8])]) throws -> [UInt8] {
        let path = directory()
        let fd = open(path, O_RDWR | O_CREAT, 0o600)
        try #require(fd >= 0)
        defer { close(fd); unlink(path) }
        let r = StagedResult()
        r.finish(StagingSync.run(StagingSync.Job(fd: fd, offset: 0, entries: entries, durable: false, result: r)))
        try r.wait()
        return try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// Archives everything applied, stops, and checks the archive: segments from entry 1 that
    /// follow each other exactly (no gap, no entry twice), holding `expected`'s bytes where
    /// given, and a restore to the end that reproduces the state.
    static func archiveAndCheck(_ local: LMDBDataStore, expected: [(index: UInt64, bytes: [UInt8])] = []) async throws {
        let store = local.storage
        let dir = NSTemporaryDirectory() + "ember-archive-\(UUID().uuidString)"
        let a = try local.startArchive(ArchiverTests.options(dir), isLeader: { true }, mark: { i in
            _ = try await store.submit(namespace: Archiver.markNamespace, .archived(through: i))
        })
        try await ArchiverTests.caughtUp(a, store)
        await a.stop()
        let archive = try DirectoryArchiveStore(directory: dir)
        let c = ArchiveCatalog(names: try archive.list())
        #expect(c.gaps.isEmpty && c.overlaps.isEmpty)
        #expect(c.segments.first?.first == 1)
        for (x, y) in zip(c.segments, c.segments.dropFirst()) { #expect(y.first == x.last + 1, "\(x.name) then \(y.name)") }
        var archived: [UInt64: [UInt8]] = [:]
        for s in c.segments {
            let seg = try ArchiveSegment(decoding: archive.get(s.name))
            for (k, e) in seg.entries.enumerated() { archived[seg.first + UInt64(k)] = e }
        }
        for e in expected { #expect(archived[e.index] == e.bytes, "entry \(e.index) as committed") }
        #expect(try ArchiveRestore.verify(archive).problems.isEmpty)
        let restored = try EmberStore(directory: NSTemporaryDirectory() + "ember-restored-\(UUID().uuidString)", options: StoreOptions())
        defer { restored.close() }
        let end = try #require(c.segments.last).last
        let r = try await ArchiveRestore.restore(from: archive, to: .index(end), into: restored,
                                                 scratchFile: NSTemporaryDirectory() + "ember-scratch-\(UUID().uuidString)")
        #expect(r.index == end && r.hashVerified)
        #expect(try restored.read(namespace: "t", path: Path("/")).node == (try store.read(namespace: "t", path: Path("/")).node))
    }

    /// kill -9 after a batch's staging write and sync, before its LMDB commit: the staging holds
    /// entries past the applied index (and a torn record after them). Opening cuts them; the
    /// next writes take those indexes, and the archive holds the committed entries only.
    @Test func entriesStagedForACommitThatDidNotHappenAreCutWhenTheStoreOpens() async throws {
        let dir = Self.directory()
        do {
            let store = try EmberStore(directory: dir, options: Self.options())
            try await ArchiverTests.write(store, 10, "a")
            #expect(store.appliedIndex == 10)
            let uncommitted = try store.encodedEntries(from: 1, through: 3, maxCount: 3).enumerated().map { k, e in
                (index: UInt64(11 + k), bytes: try LogEntry.restamped(e.bytes, index: UInt64(11 + k), term: 0, timestamp: 1))
            }
            store.close()
            let file = try Self.lastSegmentFile(dir)
            try Self.write(file, at: try Self.recordsEnd(file), try Self.records(uncommitted) + [0, 0, 0, 0, 0, 0, 0, 14, 0])
        }
        let local = try LMDBDataStore(directory: dir, options: Self.options(), logger: Logger(label: "test"))
        defer { local.close() }
        let store = local.storage
        #expect(store.appliedIndex == 10 && store.firstLogIndex == 1)
        #expect(try store.encodedEntries(from: 11, through: 20, maxCount: 10).isEmpty)
        try await ArchiverTests.write(store, 5, "b")
        let fresh = try store.encodedEntries(from: 1, through: 15, maxCount: 100)
        #expect(fresh.map(\.index) == Array(1...15))
        #expect(try fresh.suffix(5).map { try LogEntry(decoding: $0.bytes).operation.path } == (0..<5).map { try Path("/b\($0)") })
        try await Self.archiveAndCheck(local, expected: fresh)
    }

    /// kill -9 after the LMDB commit: the staging holds exactly the applied entries; the
    /// reopened node archives them all once, and its new ones after them.
    @Test func afterACommitTheReopenedNodeArchivesEveryEntryOnce() async throws {
        let dir = Self.directory()
        var before: [(index: UInt64, bytes: [UInt8])] = []
        do {
            let store = try EmberStore(directory: dir, options: Self.options())
            try await ArchiverTests.write(store, 12, "a")
            before = try store.encodedEntries(from: 1, through: 12, maxCount: 100)
            store.close()
        }
        let local = try LMDBDataStore(directory: dir, options: Self.options(), logger: Logger(label: "test"))
        defer { local.close() }
        let store = local.storage
        #expect(try store.encodedEntries(from: 1, through: 12, maxCount: 100).map(\.bytes) == before.map(\.bytes))
        try await ArchiverTests.write(store, 3, "b")
        try await Self.archiveAndCheck(local, expected: before)
    }

    /// A staging that does not reach the applied index (its tail lost) is of no use: it goes,
    /// and the archive finds its next entry gone (a reported gap, as past the hold).
    @Test func aStagingThatLacksCommittedEntriesIsDropped() async throws {
        let dir = Self.directory()
        do {
            let store = try EmberStore(directory: dir, options: Self.options())
            try await ArchiverTests.write(store, 5, "a")
            store.close()
        }
        let file = try Self.lastSegmentFile(dir)
        #expect(truncate(file, off_t(try Self.recordsEnd(file) - 1)) == 0)
        let store = try EmberStore(directory: dir, options: Self.options())
        defer { store.close() }
        #expect(store.appliedIndex == 5 && store.firstLogIndex == 6)
        #expect(try store.encodedEntries(from: 1, through: 5, maxCount: 10).isEmpty)
        #expect(try StagingLog.listSegments(dir + "/" + StagingLog.directoryName).isEmpty)
    }

    /// A directory from before the staging keeps the archive's entries as LMDB log rows: they
    /// move into the staging when it opens (and out of LMDB), and archive whole.
    @Test func logRowsOfAFormerVersionMoveIntoTheStaging() async throws {
        let dir = Self.directory()
        var rows: [(index: UInt64, bytes: [UInt8])] = []
        do {
            let store = try EmberStore(directory: dir, options: Self.options(staging: false))
            try await ArchiverTests.write(store, 10, "a")
            rows = try store.encodedEntries(from: 1, through: 10, maxCount: 100)
            #expect(rows.count == 10)
            store.close()
        }
        do {
            let local = try LMDBDataStore(directory: dir, options: Self.options(), logger: Logger(label: "test"))
            defer { local.close() }
            let store = local.storage
            #expect(store.firstLogIndex == 1)
            #expect(try store.encodedEntries(from: 1, through: 10, maxCount: 100).map(\.bytes) == rows.map(\.bytes))
            try await ArchiverTests.write(store, 4, "b")
            try await Self.archiveAndCheck(local, expected: rows)
        }
        // The rows left LMDB: opened without the staging (which that leaves alone), the log is empty.
        let plain = try EmberStore(directory: dir, options: Self.options(staging: false))
        defer { plain.close() }
        #expect(try plain.encodedEntries(from: 1, through: 100, maxCount: 100).isEmpty)
        #expect(!(try StagingLog.listSegments(dir + "/" + StagingLog.directoryName)).isEmpty)
    }

    /// Compaction removes whole staging files: without an archive writer, the staging keeps at
    /// most the hold plus one file (a quarter of the hold) of entries.
    @Test func compactionRemovesWholeFilesPastTheHold() async throws {
        var o = Self.options()
        o.archiveHold = 20
        let dir = Self.directory()
        let store = try EmberStore(directory: dir, options: o)
        defer { store.close() }
        try await ArchiverTests.write(store, 100, "a")
        let kept = store.appliedIndex - store.firstLogIndex + 1
        #expect(kept >= 20 && kept <= 25, "\(kept) entries kept")
        let files = try StagingLog.listSegments(dir + "/" + StagingLog.directoryName)
        #expect(files.first == store.firstLogIndex && files.count <= 6)
        let held = try store.encodedEntries(from: store.firstLogIndex, through: 100, maxCount: 100)
        #expect(held.map(\.index) == Array(store.firstLogIndex...100))
    }
}
