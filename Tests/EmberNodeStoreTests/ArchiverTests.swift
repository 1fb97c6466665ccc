import EmberTestSupport
import EmberCore
import EmberStorage
import Foundation
import Logging
import Synchronization
import Testing

@testable import EmberNodeStore

/// The archiver over a real LMDB store and a real archive directory: taking over from a
/// predecessor that stored a segment but did not mark it, and a gap when the log was compacted
/// past the hold while no node archived.
@Suite struct ArchiverTests {
    static func open(hold: UInt64) throws -> LMDBDataStore {
        var o = StoreOptions()
        o.mapSize = 1 << 30
        o.logRetention = 0
        o.archiveHold = hold
        o.alternatingLog = true  // as a single node that archives (`StoreFactory.open`)
        return try LMDBDataStore(directory: TestDirectory.root + "ember-archiver-\(UUID().uuidString)", options: o,
                                 logger: Logger(label: "test"))
    }

    static func options(_ dir: String) -> ArchiveOptions {
        var a = ArchiveOptions(directory: dir)
        a.segmentMaxAgeSeconds = 0.05
        a.pollMilliseconds = 20
        return a
    }

    static func write(_ store: EmberStore, _ n: Int, _ prefix: String) async throws {
        for i in 0..<n { _ = try await store.submit(namespace: "t", .set(path: try Path("/\(prefix)\(i)"), value: .int(Int64(i)))) }
    }

    /// Waits (bounded) until the archive holds every applied entry.
    static func caughtUp(_ a: Archiver, _ store: EmberStore) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let s = a.archiveStatus()
            if s.active && s.lagEntries == 0 && s.lastSegment != nil && s.archivedThrough > 0 { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("the archive did not catch up: \(a.archiveStatus())")
    }

    /// The archiver's thread runs at its nice value (background work): while it runs, one thread
    /// of the process has that value (read from the kernel's per-thread view, /proc/self/task/*/stat;
    /// no other thread sets it), and none once it stopped.
    @Test func theArchiverThreadRunsAtItsNiceValue() async throws {
        #if os(Linux)
        func threadsAt(_ nice: Int) throws -> Int {
            try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").filter { tid in
                guard let stat = try? String(contentsOfFile: "/proc/self/task/\(tid)/stat", encoding: .utf8),
                      let close = stat.lastIndex(of: ")") else { return false }
                // After the name: state (field 3) ... nice (field 19).
                return Int(stat[stat.index(close, offsetBy: 2)...].split(separator: " ")[16]) == nice
            }.count
        }
        let nice = 13
        #expect(try threadsAt(nice) == 0)
        let local = try Self.open(hold: 10_000)
        defer { local.close() }
        let store = local.storage
        var options = Self.options(TestDirectory.root + "ember-archive-\(UUID().uuidString)")
        options.threadNice = Int32(nice)
        let a = try local.startArchive(options, isLeader: { true }, mark: { i in
            _ = try await store.submit(namespace: Archiver.markNamespace, .archived(through: i))
        })
        try await Self.write(store, 5, "n")
        try await Self.caughtUp(a, store)
        #expect(try threadsAt(nice) == 1)
        await a.stop()
        // The thread ends after `stop` returns: wait for it (bounded) to leave the list.
        let deadline = ContinuousClock.now + .seconds(30)
        while try threadsAt(nice) > 0 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(try threadsAt(nice) == 0)
        #endif
    }

    /// The archiver counts its own thread's CPU (what archiving costs besides the writer's log
    /// rows): none before it runs, some once it stored a base and a segment, never more than the
    /// whole process used, and it only grows.
    @Test func theArchiverCountsItsThreadsCPU() async throws {
        func processCPU() -> Double {
            var u = rusage()
            getrusage(RUSAGE_SELF.rawValue, &u)
            return Double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + Double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6
        }
        let local = try Self.open(hold: 10_000)
        defer { local.close() }
        let store = local.storage
        let a = try local.startArchive(Self.options(TestDirectory.root + "ember-archive-\(UUID().uuidString)"), isLeader: { true },
                                       mark: { i in _ = try await store.submit(namespace: Archiver.markNamespace, .archived(through: i)) })
        try await Self.write(store, 50, "c")
        try await Self.caughtUp(a, store)
        let first = a.archiveStatus().cpuSeconds
        #expect(first > 0)
        #expect(first <= processCPU())
        try await Self.write(store, 50, "d")
        await a.stop()
        let last = a.archiveStatus().cpuSeconds
        #expect(last >= first)
        #expect(last <= processCPU())
    }

    @Test func aNewWriterAdoptsAStoredButUnmarkedSegment() async throws {
        let local = try Self.open(hold: 10_000)
        defer { local.close() }
        let store = local.storage
        let dir = TestDirectory.root + "ember-archive-\(UUID().uuidString)"
        let archive = try DirectoryArchiveStore(directory: dir)
        let base = TestDirectory.root + "ember-base-\(UUID().uuidString)"
        _ = try store.writeBackup(to: base)
        try archive.putFile(ArchiveName.base(index: 0, timestamp: 0), from: base)
        try await Self.write(store, 20, "a")
        // The predecessor stored entries 1...10 and died before its mark committed.
        let seg = try ArchiveSegment(entries: try store.encodedEntries(from: 1, through: 10, maxCount: 100), stateHash: "")
        try archive.put(seg.name, bytes: seg.encoded())
        #expect(try store.archivedThrough() == 0)
        let a = try local.startArchive(Self.options(dir), isLeader: { true }, mark: { i in
            _ = try await store.submit(namespace: Archiver.markNamespace, .archived(through: i))
        })
        try await Self.caughtUp(a, store)
        await a.stop()
        let c = ArchiveCatalog(names: try archive.list())
        #expect(c.gaps.isEmpty && c.overlaps.isEmpty)
        #expect(c.segments.first?.name == seg.name)
        #expect(c.segments.dropFirst().first?.first == 11)
        #expect(try ArchiveRestore.verify(archive).problems.isEmpty)
        // The whole history restores, to the hash the last segment recorded.
        let target = try DirectoryArchiveStore(directory: dir).list()
        #expect(!target.isEmpty)
        let restored = try EmberStore(directory: TestDirectory.root + "ember-restored-\(UUID().uuidString)", options: StoreOptions())
        defer { restored.close() }
        let end = c.segments.last!.last
        let r = try await ArchiveRestore.restore(from: archive, to: .index(end), into: restored,
                                                 scratchFile: TestDirectory.root + "ember-scratch-\(UUID().uuidString)")
        #expect(r.index == end && r.hashVerified)
        #expect(try restored.read(namespace: "t", path: try Path("/a19")).node == (try store.read(namespace: "t", path: try Path("/a19")).node))
    }

    /// A store and an archive directory for archivers that close their segment only when they
    /// stop, and the mark they log (`.archived`) through that store.
    struct Manual {
        let local: LMDBDataStore
        let dir: String
        let options: ArchiveOptions
        var store: EmberStore { local.storage }
        var archive: DirectoryArchiveStore { get throws { try DirectoryArchiveStore(directory: dir) } }

        init() throws {
            local = try ArchiverTests.open(hold: 10_000)
            dir = TestDirectory.root + "ember-archive-\(UUID().uuidString)"
            var o = ArchiverTests.options(dir)
            o.segmentMaxAgeSeconds = 3_600
            options = o
        }

        func start() throws -> Archiver {
            let store = self.store
            return try local.startArchive(options, isLeader: { true }, mark: { i in
                _ = try await store.submit(namespace: Archiver.markNamespace, .archived(through: i))
            })
        }
    }

    @Test func entriesAnotherWriterStoredMeanwhileAreNotStoredTwice() async throws {
        let m = try Manual()
        defer { m.local.close() }
        let (store, dir) = (m.store, m.dir)
        let a = try m.start()
        let deadline = ContinuousClock.now + .seconds(60)
        while a.archiveStatus().lastBase == nil && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        try await Self.write(store, 30, "a")
        // A deposed leader stores the first 10 of them while this one still buffers them.
        let archive = try DirectoryArchiveStore(directory: dir)
        let from = try store.archivedThrough() + 1
        let other = try ArchiveSegment(entries: try store.encodedEntries(from: from, through: from + 9, maxCount: 100), stateHash: "")
        try archive.put(other.name, bytes: other.encoded())
        await a.stop()
        let c = ArchiveCatalog(names: try archive.list())
        #expect(c.overlaps.isEmpty && c.gaps.isEmpty)
        #expect(c.segments.count == 2 && c.segments[0].name == other.name && c.segments[1].first == other.last + 1)
        #expect(c.segments[1].last == store.appliedIndex)
        #expect(try ArchiveRestore.verify(archive).problems.isEmpty)
    }

    /// A deposed writer's segment stored after this writer's check (inside one it stored) is
    /// removed when the next segment is stored: no entry stays archived twice.
    @Test func aLateSegmentInsideAStoredOneIsRemoved() async throws {
        let m = try Manual()
        defer { m.local.close() }
        let store = m.store
        let first = try m.start()
        try await Self.write(store, 20, "a")
        await first.stop()
        let archive = try m.archive
        let stored = try #require(ArchiveCatalog(names: try archive.list()).segments.last)
        #expect(stored.last - stored.first >= 10)
        let late = try ArchiveSegment(entries: try store.encodedEntries(from: stored.first + 2, through: stored.first + 8, maxCount: 100),
                                      stateHash: "")
        try archive.put(late.name, bytes: late.encoded())
        #expect(ArchiveCatalog(names: try archive.list()).overlaps.count == 1)
        let second = try m.start()
        try await Self.write(store, 10, "b")
        await second.stop()
        let c = ArchiveCatalog(names: try archive.list())
        #expect(c.overlaps.isEmpty && c.gaps.isEmpty)
        #expect(!c.segments.contains { $0.name == late.name } && c.segments.contains { $0.name == stored.name })
        #expect(c.segments.last?.last == store.appliedIndex)
        #expect(try ArchiveRestore.verify(archive).problems.isEmpty)
    }

    /// Restores to every segment's end: each reaches it, and reproduces the hash it recorded.
    static func restoresToEverySegmentEnd(_ archive: DirectoryArchiveStore) async throws {
        for s in ArchiveCatalog(names: try archive.list()).segments {
            let seg = try ArchiveSegment(decoding: try archive.get(s.name))
            let restored = try EmberStore(directory: TestDirectory.root + "ember-restored-\(UUID().uuidString)", options: StoreOptions())
            defer { restored.close() }
            let r = try await ArchiveRestore.restore(from: archive, to: .index(s.last), into: restored,
                                                     scratchFile: TestDirectory.root + "ember-scratch-\(UUID().uuidString)")
            #expect(r.index == s.last, "\(s.name)")
            #expect(r.hashVerified == !seg.stateHash.isEmpty, "\(s.name)")
        }
    }

    /// A late segment that starts inside a stored one and ends past it (neither holds the other):
    /// the next writer trims it to start after the stored one; its end and the state hash it
    /// recorded there stay, every restore stays exact, and verify finds nothing.
    @Test func aLateSegmentOverlappingAStoredOnePartlyIsTrimmed() async throws {
        let m = try Manual()
        defer { m.local.close() }
        let store = m.store
        let first = try m.start()
        try await Self.write(store, 20, "a")
        await first.stop()
        let archive = try m.archive
        let stored = try #require(ArchiveCatalog(names: try archive.list()).segments.last)
        try await Self.write(store, 5, "b")
        let (at, hash) = try store.stateHashAtApplied()
        #expect(at > stored.last)
        // A deposed writer's segment from inside the stored one to `at`, stored after it.
        let late = try ArchiveSegment(entries: try store.encodedEntries(from: stored.first + 5, through: at, maxCount: 100), stateHash: hash)
        try archive.put(late.name, bytes: late.encoded())
        try await Self.write(store, 5, "c")
        #expect(ArchiveCatalog(names: try archive.list()).overlaps.count == 1)
        let second = try m.start()
        try await Self.write(store, 5, "d")
        await second.stop()
        let c = ArchiveCatalog(names: try archive.list())
        #expect(c.overlaps.isEmpty && c.gaps.isEmpty, "\(c.segments.map(\.name))")
        #expect(c.segments.contains { $0.name == stored.name } && !c.segments.contains { $0.name == late.name })
        let trimmed = try #require(c.segments.first { $0.first == stored.last + 1 })
        #expect(trimmed.last == at)
        #expect(try ArchiveSegment(decoding: try archive.get(trimmed.name)).stateHash == hash)
        #expect(c.segments.last?.last == store.appliedIndex)
        #expect(try ArchiveRestore.verify(archive).problems.isEmpty)
        try await Self.restoresToEverySegmentEnd(archive)
    }

    /// A late segment that two stored ones cover together (inside neither alone) is removed.
    @Test func aLateSegmentTwoStoredOnesCoverIsRemoved() async throws {
        let m = try Manual()
        defer { m.local.close() }
        let store = m.store
        for prefix in ["a", "b"] {
            let a = try m.start()
            try await Self.write(store, 20, prefix)
            await a.stop()
        }
        let archive = try m.archive
        let stored = ArchiveCatalog(names: try archive.list()).segments
        try #require(stored.count == 2 && stored[1].first == stored[0].last + 1 && stored[1].last - stored[1].first > 5)
        // From the stored segments' entries (the log no longer holds those the archive marked).
        var entries: [(index: UInt64, bytes: [UInt8])] = []
        for s in stored {
            let seg = try ArchiveSegment(decoding: try archive.get(s.name))
            entries += seg.entries.enumerated().map { (seg.first + UInt64($0.offset), $0.element) }
        }
        let late = try ArchiveSegment(entries: entries.filter { $0.index >= stored[0].first + 2 && $0.index <= stored[1].first + 3 },
                                      stateHash: "")
        try archive.put(late.name, bytes: late.encoded())
        #expect(ArchiveCatalog(names: try archive.list()).overlaps.count == 2)
        let third = try m.start()
        try await Self.write(store, 5, "c")
        await third.stop()
        let c = ArchiveCatalog(names: try archive.list())
        #expect(c.overlaps.isEmpty && c.gaps.isEmpty, "\(c.segments.map(\.name))")
        #expect(c.segments.prefix(2).map(\.name) == stored.map(\.name))
        #expect(c.segments.last?.last == store.appliedIndex)
        #expect(try ArchiveRestore.verify(archive).problems.isEmpty)
        try await Self.restoresToEverySegmentEnd(archive)
    }

    /// A saturated leader closes segments by size: those record the state hash (a full scan of
    /// the state) only once the entry bytes stored since the last recorded hash reach the bytes
    /// that hash scanned (`hashSpacing` 1), while 0 records it at every close. Every segment end
    /// restores either way, and reproduces the hash where one is recorded.
    @Test(arguments: [1.0, 0.0]) func segmentsClosedBySizeRecordTheHashSpacedByTheStateSize(spacing: Double) async throws {
        let local = try Self.open(hold: 100_000)
        defer { local.close() }
        let store = local.storage
        let dir = TestDirectory.root + "ember-archive-\(UUID().uuidString)"
        // A state of ~200 KB in one entry: far more than the entries written after it.
        var big = KeyMap<JSON>()
        for i in 0..<200 { big["c\(i)"] = .string(String(repeating: "x", count: 1_000)) }
        _ = try await store.submit(namespace: "t", .set(path: try Path("/big"), value: .object(big)))
        var o = Self.options(dir)
        o.segmentMaxAgeSeconds = 3_600
        o.segmentMaxBytes = 2_000
        o.hashSpacing = spacing
        let a = try local.startArchive(o, isLeader: { true }, mark: { i in
            _ = try await store.submit(namespace: Archiver.markNamespace, .archived(through: i))
        })
        let deadline = ContinuousClock.now + .seconds(60)
        while a.archiveStatus().lastSegment == nil && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        try await Self.write(store, 300, "a")
        await a.stop()
        let archive = try DirectoryArchiveStore(directory: dir)
        let c = ArchiveCatalog(names: try archive.list())
        #expect(c.gaps.isEmpty && c.overlaps.isEmpty && c.segments.last?.last == store.appliedIndex)
        let segments = try c.segments.map { try ArchiveSegment(decoding: try archive.get($0.name)) }
        let hashed = segments.filter { !$0.stateHash.isEmpty }.count
        if spacing == 0 {
            #expect(hashed == segments.count)
        } else {
            // ~20 KB of entries after a hash over ~200 KB: the first size close and the stop's.
            #expect(segments.count >= 6 && hashed >= 1 && hashed <= 2, "\(hashed) of \(segments.count)")
        }
        try await Self.restoresToEverySegmentEnd(archive)
        let restored = try EmberStore(directory: TestDirectory.root + "ember-restored-\(UUID().uuidString)", options: StoreOptions())
        defer { restored.close() }
        _ = try await ArchiveRestore.restore(from: archive, to: .index(store.appliedIndex), into: restored,
                                             scratchFile: TestDirectory.root + "ember-scratch-\(UUID().uuidString)")
        #expect(try restored.stateHash() == (try store.stateHash()))
    }

    @Test func compactionPastTheHoldIsAReportedGapAndANewBase() async throws {
        let local = try Self.open(hold: 20)
        defer { local.close() }
        let store = local.storage
        let dir = TestDirectory.root + "ember-archive-\(UUID().uuidString)"
        let leading = Atomic<Bool>(true)
        let a = try local.startArchive(Self.options(dir), isLeader: { leading.load(ordering: .relaxed) }, mark: { i in
            _ = try await store.submit(namespace: Archiver.markNamespace, .archived(through: i))
        })
        try await Self.write(store, 5, "a")
        try await Self.caughtUp(a, store)
        let before = a.archiveStatus().archivedThrough
        // No node archives while 100 entries are written: the log keeps 20 of them at most.
        leading.store(false, ordering: .relaxed)
        while a.archiveStatus().active { try await Task.sleep(for: .milliseconds(10)) }
        try await Self.write(store, 100, "b")
        #expect(store.firstLogIndex > before + 1)
        leading.store(true, ordering: .relaxed)
        try await Self.caughtUp(a, store)
        await a.stop()
        let s = a.archiveStatus()
        #expect(s.gaps.count == 1)
        let archive = try DirectoryArchiveStore(directory: dir)
        let c = ArchiveCatalog(names: try archive.list())
        #expect(c.gaps.count == 1 && c.gaps[0].from == before + 1)
        // A restore across the gap is refused; after the new base it works.
        let restored = try EmberStore(directory: TestDirectory.root + "ember-restored-\(UUID().uuidString)", options: StoreOptions())
        defer { restored.close() }
        #expect(throws: ArchiveError.self) { try c.plan(.index(c.gaps[0].from)) }
        let r = try await ArchiveRestore.restore(from: archive, to: .index(c.segments.last!.last), into: restored,
                                                 scratchFile: TestDirectory.root + "ember-scratch-\(UUID().uuidString)")
        #expect(r.baseIndex > before && r.hashVerified)
        #expect(try restored.stateHash() == (try store.stateHash()))
    }
}
