import EmberTestSupport
import EmberCore
import Foundation
import Logging
import Testing

@testable import EmberNodeStore
@testable import EmberStorage

/// A single node that archives keeps the entries its archive lacks as log rows, in each batch's
/// own transaction. A data directory of the version that kept them in staging files
/// (`DATA/archive-staging/`) has them imported as rows when it opens (`StagingImport`): cut to
/// the applied index, dropped whole when they do not reach it; and a batch that fails leaves no
/// row behind.
@Suite struct ArchiveStagingImportTests {
    static func options(hold: UInt64 = 10_000) -> StoreOptions {
        var o = StoreOptions()
        o.mapSize = 1 << 30
        o.logRetention = 0
        o.archiveHold = hold
        o.alternatingLog = hold > 0
        return o
    }

    static func directory() -> String { TestDirectory.root + "ember-staging-\(UUID().uuidString)" }

    static func stagingDirectory(_ dir: String) -> String { dir + "/" + StagingImport.directoryName }

    /// A data directory as the staging version left it: `n` writes applied, LMDB's log empty
    /// (that version kept no rows: here a store without the hold writes none), and the staging
    /// file holding `records` (with `tail` bytes after them).
    static func formerDirectory(writes n: Int, records: [(index: UInt64, bytes: [UInt8])], tail: [UInt8] = []) async throws -> String {
        let dir = directory()
        let store = try EmberStore(directory: dir, options: Self.options(hold: 0))
        try await ArchiverTests.write(store, n, "a")
        #expect(store.appliedIndex == UInt64(n))
        #expect(try store.encodedEntries(from: 1, through: UInt64(n), maxCount: n).isEmpty)
        store.close()
        let stage = stagingDirectory(dir)
        try FileManager.default.createDirectory(atPath: stage, withIntermediateDirectories: true)
        if let first = records.first?.index {
            // Zeros after the records, as the former version wrote ahead of them.
            let bytes = records.flatMap { StagingImport.record(index: $0.index, entry: $0.bytes) } + tail + [UInt8](repeating: 0, count: 4096)
            try Data(bytes).write(to: URL(fileURLWithPath: stage + "/" + StagingImport.name(first)))
        }
        return dir
    }

    /// The entries `n` writes like `formerDirectory`'s log (the same operations) as another
    /// store logs them: what the former version staged.
    static func loggedEntries(writes n: Int) async throws -> [(index: UInt64, bytes: [UInt8])] {
        let store = try EmberStore(directory: directory(), options: Self.options())
        defer { store.close() }
        try await ArchiverTests.write(store, n, "a")
        return try store.encodedEntries(from: 1, through: UInt64(n), maxCount: n)
    }

    /// Archives everything applied, stops, and checks the archive: segments from entry 1 that
    /// follow each other exactly (no gap, no entry twice), holding `expected`'s bytes, and a
    /// restore to the end that reproduces the state (hash verified).
    static func archiveAndCheck(_ local: LMDBDataStore, expected: [(index: UInt64, bytes: [UInt8])]) async throws {
        let store = local.storage
        let dir = TestDirectory.root + "ember-archive-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
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
        let restored = try EmberStore(directory: TestDirectory.root + "ember-restored-\(UUID().uuidString)", options: StoreOptions())
        defer { restored.close() }
        let end = try #require(c.segments.last).last
        let r = try await ArchiveRestore.restore(from: archive, to: .index(end), into: restored,
                                                 scratchFile: TestDirectory.root + "ember-scratch-\(UUID().uuidString)")
        #expect(r.index == end && r.hashVerified)
        #expect(try restored.read(namespace: "t", path: Path("/")).node == (try store.read(namespace: "t", path: Path("/")).node))
    }

    /// The staged entries through the applied index become the log's rows; records staged for a
    /// commit that did not happen, and a torn record after them, are left out, and the next
    /// writes take those indexes. The staging goes; the archive holds the imported entries.
    @Test func aFormerStagingBecomesLogRowsCutToTheAppliedIndex() async throws {
        let logged = try await Self.loggedEntries(writes: 10)
        let uncommitted = try logged.prefix(3).enumerated().map { k, e in
            (index: UInt64(11 + k), bytes: try LogEntry.restamped(e.bytes, index: UInt64(11 + k), term: 0, timestamp: 1))
        }
        let dir = try await Self.formerDirectory(writes: 10, records: logged + uncommitted, tail: [0, 0, 0, 0, 0, 0, 0, 14, 0, 0, 0, 40])
        let local = try LMDBDataStore(directory: dir, options: Self.options(), logger: Logger(label: "test"))
        defer { local.close() }
        let store = local.storage
        #expect(store.appliedIndex == 10 && store.firstLogIndex == 1)
        #expect(!FileManager.default.fileExists(atPath: Self.stagingDirectory(dir)))
        #expect(try store.encodedEntries(from: 1, through: 20, maxCount: 100).map(\.bytes) == logged.map(\.bytes))
        try await ArchiverTests.write(store, 5, "b")
        let rows = try store.encodedEntries(from: 1, through: 20, maxCount: 100)
        #expect(rows.map(\.index) == Array(1...15))
        #expect(try rows.suffix(5).map { try LogEntry(decoding: $0.bytes).operation.path } == (0..<5).map { try Path("/b\($0)") })
        try await Self.archiveAndCheck(local, expected: rows)
    }

    /// A staging that does not reach the applied index (its tail lost) is of no use: nothing is
    /// imported, the log's first index is past the applied one (the archiver reports the gap
    /// and starts from a base), and the staging goes.
    @Test func aStagingThatLacksCommittedEntriesIsNotImported() async throws {
        let logged = try await Self.loggedEntries(writes: 5)
        let dir = try await Self.formerDirectory(writes: 5, records: Array(logged.prefix(4)))
        let store = try EmberStore(directory: dir, options: Self.options())
        defer { store.close() }
        #expect(store.appliedIndex == 5 && store.firstLogIndex == 6)
        #expect(try store.encodedEntries(from: 1, through: 5, maxCount: 10).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: Self.stagingDirectory(dir)))
    }

    /// A store that does not archive as a single node (an offline `ember` command on a stopped
    /// node) leaves the staging alone: the node's next start imports it.
    @Test func aStoreThatDoesNotArchiveLeavesTheStagingAlone() async throws {
        let logged = try await Self.loggedEntries(writes: 4)
        let dir = try await Self.formerDirectory(writes: 4, records: logged)
        do {
            let plain = try EmberStore(directory: dir, options: Self.options(hold: 0))
            plain.close()
        }
        #expect(try StagingImport.listSegments(Self.stagingDirectory(dir)) == [1])
        let store = try EmberStore(directory: dir, options: Self.options())
        defer { store.close() }
        #expect(try store.encodedEntries(from: 1, through: 4, maxCount: 10).map(\.bytes) == logged.map(\.bytes))
    }

    /// A write that does not fit (the map is full: refused, or its transaction fails) leaves no
    /// log row: the rows are exactly the applied entries, so the archive and the state never part.
    @Test func aWriteThatDoesNotFitLeavesNoLogRow() async throws {
        var o = Self.options()
        o.mapSize = 2 << 20
        let store = try EmberStore(directory: Self.directory(), options: o)
        defer { store.close() }
        let value = JSON.string(String(repeating: "x", count: 50_000))
        var failure: (any Error)?
        for i in 0..<200 {
            do { _ = try await store.submit(namespace: "t", .set(path: try Path("/f\(i)"), value: value)) } catch {
                failure = error
                break
            }
        }
        let error = try #require(failure, "2 MiB took 200 writes of 50 KB")
        #expect(SpaceGuard.isNoSpace(error), "\(error)")
        let applied = store.appliedIndex
        try #require(applied > 0)
        #expect(try store.encodedEntries(from: 1, through: applied + 10, maxCount: 10_000).map(\.index) == Array(1...applied))
    }
}
