import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// A learner's commits without a data sync (`LazySync`): marked on disk before the first one,
/// made durable by the interval's sync or any synced commit, the marker gone at a clean close or
/// after idle intervals; a store marked in another boot refuses to open.
@Suite struct LazySyncTests {
    /// Options whose boot id is read from a file of the test's own (`boot`: its content).
    static func options(boot: String?) -> (StoreOptions, bootFile: String) {
        let file = tempDir() + "/boot_id"
        if let boot { #expect(FileManager.default.createFile(atPath: file, contents: Data((boot + "\n").utf8))) }
        var o = smallOptions()
        o.bootIDPath = file
        return (o, file)
    }

    static func marker(_ dir: String) -> String? {
        try? String(contentsOfFile: dir + "/" + LazySync.markerName, encoding: .utf8)
    }

    static func apply(_ s: EmberStore, _ range: ClosedRange<Int>, synced: Bool) async throws {
        let (_, release) = try await s.applyUnloggedReleasing(
            entries: range.map { UnloggedApplyTests.entry(UInt64($0), "/k/\($0 % 5)", "\($0)") }, synced: synced)
        await s.committed(release)
    }

    @Test func unsyncedCommitsAreMarkedSyncedOnTheIntervalAndUnmarkedAtClose() async throws {
        let dir = tempDir()
        let (o, _) = Self.options(boot: "boot-a")
        do {
            let s = try openStore(dir, o)
            #expect(s.commitsLazily)
            #expect(Self.marker(dir) == nil)
            try await Self.apply(s, 1...10, synced: false)
            #expect(s.metrics.lazyCommits == 1)
            #expect(Self.marker(dir) == "boot-a\n", "the marker names the boot before the first unsynced commit")
            try await Self.apply(s, 11...12, synced: false)
            #expect(s.metrics.lazyCommits == 2)
            #expect(s.startLazySync())
            await s.lazySyncBarrier()
            #expect(s.metrics.lazySyncs == 1)
            // Nothing new: the next interval syncs nothing; the marker stays until idle long enough.
            #expect(s.startLazySync())
            await s.lazySyncBarrier()
            #expect(s.metrics.lazySyncs == 1 && Self.marker(dir) != nil)
            try await Self.apply(s, 13...13, synced: false)
            s.close()
            #expect(Self.marker(dir) == nil, "a clean close syncs and removes the marker")
        }
        let s = try openStore(dir, o)
        #expect(s.appliedIndex == 13)
        #expect(try s.get("/k/3") == n("13"))
    }

    /// The interval's sync runs off the writer thread: applies go on while it flushes, and it
    /// counts as durable only the commits made before it began.
    @Test func theIntervalSyncHoldsNoApplyAndCoversOnlyTheCommitsBeforeIt() async throws {
        let dir = tempDir()
        let (o, _) = Self.options(boot: "boot-g")
        let s = try openStore(dir, o)
        let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), ended = DispatchSemaphore(value: 0)
        s.core.beforeLazySync.withLock {
            $0 = {
                entered.signal()
                // Bounded, so that a sync on the writer thread (the defect) fails this test
                // instead of hanging it.
                _ = release.wait(timeout: .now() + 10)
                ended.signal()
            }
        }
        try await Self.apply(s, 1...3, synced: false)
        try await Self.apply(s, 4...5, synced: false)
        #expect(s.startLazySync())
        #expect(entered.wait(timeout: .now() + 10) == .success, "the sync began")
        // While the sync is held, the writer applies and commits.
        try await Self.apply(s, 6...8, synced: false)
        #expect(ended.wait(timeout: .now()) == .timedOut, "the apply waited for the interval's sync")
        #expect(try s.get("/k/3") == n("8"))
        #expect(s.metrics.lazySyncs == 0 && s.owesLazySync)
        // A second interval while one runs starts none.
        #expect(s.startLazySync())
        await s.writerBarrier()
        release.signal()
        await s.lazySyncBarrier()
        #expect(s.metrics.lazySyncs == 1)
        let unsynced = try await s.perform { $0.lazySync.unsyncedCommits }
        #expect(unsynced == 1, "the commit made during the sync is still owed")
        #expect(s.owesLazySync)
        s.core.beforeLazySync.withLock { $0 = nil }
        #expect(s.startLazySync())
        await s.lazySyncBarrier()
        #expect(s.metrics.lazySyncs == 2)
        #expect(try await s.perform { $0.lazySync.unsyncedCommits } == 0)
        s.close()
        #expect(Self.marker(dir) == nil)
    }

    @Test func aSyncedCommitCoversTheUnsyncedOnesAndRemovesTheMarker() async throws {
        let dir = tempDir()
        let (o, _) = Self.options(boot: "boot-b")
        let s = try openStore(dir, o)
        #expect(!s.owesLazySync, "nothing committed without a sync yet: no interval job is needed")
        try await Self.apply(s, 1...4, synced: false)
        #expect(s.owesLazySync && Self.marker(dir) != nil)
        try await Self.apply(s, 5...6, synced: true)  // its data sync flushes the whole file
        #expect(s.metrics.lazyCommits == 1)
        #expect(Self.marker(dir) == nil, "a synced commit leaves nothing for the marker to warn of")
        #expect(!s.owesLazySync)
        s.startLazySync()
        await s.lazySyncBarrier()
        #expect(s.metrics.lazySyncs == 0, "nothing was left to sync")
        // The next unsynced commit marks the store again.
        try await Self.apply(s, 7...7, synced: false)
        #expect(Self.marker(dir) == "boot-b\n" && s.metrics.lazyCommits == 2 && s.owesLazySync)
        s.close()
        #expect(Self.marker(dir) == nil)
    }

    @Test func idleIntervalsRemoveTheMarkerAndThenNothingIsOwed() async throws {
        let dir = tempDir()
        let (o, _) = Self.options(boot: "boot-e")
        let s = try openStore(dir, o)
        try await Self.apply(s, 1...4, synced: false)
        #expect(s.startLazySync())
        await s.lazySyncBarrier()
        #expect(s.metrics.lazySyncs == 1)
        // Synced, but still marked: the next unsynced commit then needs no marker sync of its own.
        #expect(s.owesLazySync && Self.marker(dir) != nil)
        for k in 1...LazySync.idleIntervalsBeforeMarkerRemoval {
            #expect(Self.marker(dir) != nil && s.owesLazySync, "still marked after \(k - 1) idle intervals")
            s.startLazySync()
            await s.lazySyncBarrier()
        }
        #expect(s.metrics.lazySyncs == 1, "nothing more was synced")
        #expect(Self.marker(dir) == nil && !s.owesLazySync)
        s.close()
    }

    @Test func aMarkerLeftInThisBootIsOwedUntilRemoved() async throws {
        let dir = tempDir()
        let (o, _) = Self.options(boot: "boot-f")
        do {
            let s = try openStore(dir, o)
            try await Self.apply(s, 1...3, synced: false)
            s.close()
        }
        // A process killed before its close (same boot): the marker is there at the next open.
        try "boot-f\n".write(toFile: dir + "/" + LazySync.markerName, atomically: false, encoding: .utf8)
        let s = try openStore(dir, o)
        #expect(s.owesLazySync, "the intervals must go on until the marker is removed")
        try await Self.apply(s, 4...4, synced: true)
        #expect(!s.owesLazySync && Self.marker(dir) == nil)
        s.close()
    }

    @Test func aStoreMarkedInAnotherBootIsNotOpened() async throws {
        let dir = tempDir()
        let (o, bootFile) = Self.options(boot: "boot-c")
        do {
            let s = try openStore(dir, o)
            try await Self.apply(s, 1...3, synced: false)
            s.close()
        }
        // What a process killed before its close leaves: the marker of its boot.
        try "boot-c\n".write(toFile: dir + "/" + LazySync.markerName, atomically: false, encoding: .utf8)
        do {
            // The same boot: the kernel kept its writes; it opens, with everything.
            let s = try openStore(dir, o)
            #expect(s.appliedIndex == 3)
            s.close()
            #expect(Self.marker(dir) == nil)
        }
        try "boot-c\n".write(toFile: dir + "/" + LazySync.markerName, atomically: false, encoding: .utf8)
        try "boot-d\n".write(toFile: bootFile, atomically: false, encoding: .utf8)
        #expect(throws: StorageError.unsyncedAfterMachineRestart(directory: dir)) { try openStore(dir, o) }
        // Nor where the boot cannot be told.
        var unknown = o
        unknown.bootIDPath = dir + "/no-such-file"
        #expect(throws: StorageError.unsyncedAfterMachineRestart(directory: dir)) { try openStore(dir, unknown) }
        #expect(StorageError.unsyncedAfterMachineRestart(directory: dir).description.contains("--join"))
    }

    @Test func withoutABootIDCommitsKeepTheirSync() async throws {
        let dir = tempDir()
        let (o, _) = Self.options(boot: nil)
        let s = try openStore(dir, o)
        #expect(!s.commitsLazily)
        try await Self.apply(s, 1...5, synced: false)
        #expect(s.metrics.lazyCommits == 0 && Self.marker(dir) == nil)
        #expect(try s.get("/k/2") == n("2"))
        s.close()
    }
}
