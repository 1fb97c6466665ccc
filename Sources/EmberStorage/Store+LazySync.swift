import CLMDB
import Foundation
import Synchronization

/// Commits without a data sync, for a learner (issue 38): its copy counts for no quorum, so its
/// batches need not be on disk before it acknowledges them; what it loses in a crash its leader
/// sends again (a rejection below the acknowledged index is how a leader sees a member that lost
/// entries). Such a commit writes its pages and meta page to the file (`MDB_NOSYNC`) and returns;
/// one data sync of the file on an interval (`EmberStore.startLazySync`) and at close makes them
/// durable, and so does any ordinary commit (its data sync flushes the whole file).
///
/// The interval's sync runs on a thread of its own (`StoreCore.lazySyncer`), not the writer's:
/// it flushes a second of commits, and on the writer it held every apply queued behind it for
/// that long (issue 38: the learner's listeners waited, the p99 of write → learner's listener).
/// It covers the commits made before it began; later ones wait for the next.
///
/// What a crash costs:
/// - The process alone (kill -9, a trap): nothing. The written pages are in the kernel's cache.
/// - The machine (power, kernel): the commits since the last sync, and possibly the file's
///   consistency: without a sync between them, the meta page may reach the disk before the pages
///   it points to. So before its first unsynced commit the store writes, and syncs, a marker
///   naming the boot (`/proc/sys/kernel/random/boot_id`); opened after another boot with the
///   marker still there, it refuses to open (`StorageError.unsyncedAfterMachineRestart`): the
///   learner is started again from an empty data directory and gets a snapshot. A clean close,
///   any synced commit (it flushes what came before) and `idleIntervalsBeforeMarkerRemoval`
///   intervals with nothing to sync remove the marker.
/// Where the boot cannot be told (no boot id), commits keep their data sync.
struct LazySync {
    /// The marker's file name in the store's directory.
    static let markerName = "unsynced-commits"
    /// Intervals in a row with nothing to sync after which the marker goes (the next unsynced
    /// commit writes it again, with a sync of its own): a learner that stopped receiving writes
    /// does not stay one a machine crash would refuse.
    static let idleIntervalsBeforeMarkerRemoval = 10

    let markerPath: String
    /// The boot the marker names; nil: unknown, commits keep their data sync.
    let bootID: String?
    /// The marker is on disk (created by this process or left by a crash of one in this boot).
    var markerPresent: Bool
    /// Commits made without a data sync so far, and how many of the first of them are durable
    /// (by a sync that began after them).
    var lazyCommits: UInt64 = 0
    var durableCommits: UInt64 = 0
    /// An interval sync is running (at most one at a time).
    var syncing = false
    /// Interval syncs in a row that found nothing to sync.
    var idleIntervals = 0

    /// Commits made without a data sync that no sync covers yet.
    var unsyncedCommits: UInt64 { lazyCommits - durableCommits }

    /// Every commit so far is durable (a synced commit flushed the whole file, or a sync
    /// covered them).
    mutating func allDurable() { durableCommits = lazyCommits }

    var enabled: Bool { bootID != nil }

    /// Opens the marker state of `directory`: refuses a store a machine crash may have left
    /// inconsistent (a marker of another boot).
    static func load(directory: String, bootIDPath: String) throws -> LazySync {
        let path = (directory as NSString).appendingPathComponent(markerName)
        let boot = (try? String(contentsOfFile: bootIDPath, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        let bootID = boot?.isEmpty == false ? boot : nil
        guard let marked = try? String(contentsOfFile: path, encoding: .utf8) else {
            return LazySync(markerPath: path, bootID: bootID, markerPresent: false)
        }
        let markedBoot = marked.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let bootID, markedBoot == bootID else {
            throw StorageError.unsyncedAfterMachineRestart(directory: directory)
        }
        // The same boot: a process crash, whose writes the kernel still holds.
        return LazySync(markerPath: path, bootID: bootID, markerPresent: true)
    }

    /// Before a commit without a data sync: the marker, durable (file and directory entry).
    mutating func beforeUnsyncedCommit() throws {
        guard !markerPresent, let bootID else { return }
        guard FileManager.default.createFile(atPath: markerPath, contents: Data((bootID + "\n").utf8)) else {
            throw StorageError.corrupt("cannot write \(markerPath)")
        }
        for path in [markerPath, (markerPath as NSString).deletingLastPathComponent] {
            let fd = open(path, O_RDONLY)
            guard fd >= 0 else { throw StorageError.corrupt("cannot open \(path): errno \(errno)") }
            defer { close(fd) }
            guard fsync(fd) == 0 else { throw StorageError.corrupt("cannot sync \(path): errno \(errno)") }
        }
        markerPresent = true
        idleIntervals = 0
    }

    /// After everything committed is durable, and nothing unsynced may follow unmarked: the
    /// marker goes (no sync needed: a marker that survives a crash only costs a resync).
    mutating func removeMarker() {
        guard markerPresent else { return }
        unlink(markerPath)
        markerPresent = false
    }
}

extension Writer {
    /// The interval's sync (`EmberStore.startLazySync`): hands the flush of the commits made
    /// without one to the syncer thread (the writer goes on), or, after
    /// `idleIntervalsBeforeMarkerRemoval` intervals with nothing to flush, removes the marker.
    func startIntervalSync() {
        guard lazySync.unsyncedCommits > 0 else {
            if lazySync.markerPresent && !lazySync.syncing {
                lazySync.idleIntervals += 1
                if lazySync.idleIntervals >= LazySync.idleIntervalsBeforeMarkerRemoval {
                    lazySync.removeMarker()
                    publishLazySyncOwed()
                }
            }
            return
        }
        guard !lazySync.syncing else { return }  // the last interval's is still running
        lazySync.syncing = true
        lazySync.idleIntervals = 0
        // Every commit counted so far has written its pages (`commit` counts it after
        // `mdb_txn_commit` returned): a sync that begins after this covers them. The handle is
        // held so a defrag switching environments meanwhile leaves this file open.
        let covered = lazySync.lazyCommits
        let handle = store.environment.withLock { $0 }
        let core = store
        core.lazySyncer.async {
            core.beforeLazySync.withLock { $0 }?()
            var fd: Int32 = -1
            let synced = mdb_env_get_fd(handle.env, &fd) == 0 && fdatasync(fd) == 0
            withExtendedLifetime(handle) {}
            // Closed meanwhile: the close's own sync (`finishLazySync`) covered them.
            _ = core.enqueueExclusive { w in w.intervalSyncEnded(covering: covered, synced: synced) }
        }
    }

    /// The syncer's sync of the first `covering` commits ended (`synced` false: it failed and
    /// they stay owed; the next interval retries).
    func intervalSyncEnded(covering: UInt64, synced: Bool) {
        lazySync.syncing = false
        guard synced else {
            store.metricsState.withLock { $0.lazySyncFailures += 1 }
            return
        }
        lazySync.durableCommits = max(lazySync.durableCommits, covering)
        store.metricsState.withLock { $0.lazySyncs += 1 }
        publishLazySyncOwed()
    }

    /// Tells the Raft host's ticks whether an interval sync has anything to do (`owesLazySync`).
    func publishLazySyncOwed() {
        store.lazySyncOwed.store(lazySync.unsyncedCommits > 0 || lazySync.markerPresent, ordering: .relaxed)
    }

    /// At close: an interval sync still running ends first (it uses the file), then everything
    /// is made durable and the marker removed.
    func finishLazySync() {
        store.lazySyncer.sync {}
        guard lazySync.markerPresent || lazySync.unsyncedCommits > 0 else { return }
        guard mdb_env_sync(store.env, 1) == 0 else { return }  // the marker stays: a crash now costs a resync
        lazySync.allDurable()
        lazySync.removeMarker()
        publishLazySyncOwed()
    }
}

extension EmberStore {
    /// Whether this store can commit without a data sync (`applyUnloggedReleasing(synced: false)`):
    /// it can tell a machine restart from a process restart (a boot id).
    public var commitsLazily: Bool { core.lazySyncEnabled }

    /// Whether the store holds commits made without a data sync or their marker: what
    /// `startLazySync` has to do. False on a store that never committed so (a voter's), and
    /// after a synced commit or a learner's idle intervals removed the marker.
    public var owesLazySync: Bool { core.lazySyncOwed.load(ordering: .relaxed) }

    /// Starts the interval's sync of the commits made without one (see `LazySync`), after what
    /// is queued on the writer, on the syncer thread; returns at once. False when the store is
    /// closed.
    @discardableResult
    public func startLazySync() -> Bool {
        enqueueExclusive { w in w.startIntervalSync() }
    }

    /// Tests: returns once the interval sync started before it has ended and been counted.
    func lazySyncBarrier() async {
        await writerBarrier()
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in core.lazySyncer.async { c.resume() } }
        await writerBarrier()
    }
}
