import EmberCore
import Foundation

/// Point-in-time restore: the newest base at or before the target, then the archived entries
/// after it up to the last one at or before the target, applied by the store's own `Applier`
/// (server values, rules and conditions resolve as they did: every input is in the entry)
/// through its restore-only path (`EmberStore.replayArchived`: large transactions, no log rows).
public enum ArchiveRestore {
    public struct Summary: Sendable, Equatable {
        public var base: String
        public var baseIndex: UInt64
        public var entriesReplayed: Int
        /// The index and the time (the latest entry time up to it) reached.
        public var index: UInt64
        public var timestamp: Int64
        public var stateHash: String
        /// The restore ended at a segment's end and reproduced the hash that segment recorded.
        public var hashVerified: Bool
    }

    /// Entries, and their encoded bytes, applied per store transaction during the replay: the
    /// transaction's dirty pages stay in memory until it commits, and one batch is decoded
    /// while the one before it applies (`EmberStore.replayArchived`), so two are held at once.
    public static let replayBatchEntries = 50_000
    public static let replayBatchBytes = 16 << 20

    /// One pass: the plan from the listing (a gap or a target outside the window fails before
    /// anything is installed), then the base, then each segment fetched and decoded once and
    /// replayed. A segment found corrupt (its whole checksum is checked before any of its
    /// entries is applied) or holding another range fails the restore with `store` holding a
    /// state older than the target: the caller discards it (`ember restore` restores into a
    /// staging directory and moves the result into place only on success).
    /// `batchEntries`/`batchBytes`: the replay's transaction bounds (tests make them small).
    public static func restore(from archive: any ArchiveStore, to target: ArchiveCatalog.Target, into store: EmberStore,
                               scratchFile: String, batchEntries: Int = replayBatchEntries,
                               batchBytes: Int = replayBatchBytes) async throws -> Summary {
        precondition(batchEntries > 0 && batchBytes > 0, "replay batches hold at least one entry")
        let catalog = ArchiveCatalog(names: try archive.list())
        let plan = try catalog.plan(target)
        try archive.getFile(plan.base.name, to: scratchFile)
        defer { try? FileManager.default.removeItem(atPath: scratchFile) }
        do { _ = try BackupFormat.verify(path: scratchFile) } catch { throw ArchiveError("base \(plan.base.name): \(error)") }
        let installed = try await store.restoreBackup(from: scratchFile)
        guard installed.appliedIndex == plan.base.first else {
            throw ArchiveError("base \(plan.base.name) holds index \(installed.appliedIndex), not \(plan.base.first)")
        }
        var replay = Replay(store: store, index: plan.base.first, timestamp: plan.base.lastTimestamp)
        var lastHash: (index: UInt64, hash: String)? = nil
        do {
            segments: for s in plan.segments {
                // Fetched, checked and decoded (nodes and keys built too) while the writer applies the batch before.
                let seg = try segment(s, archive)
                guard seg.first <= replay.index + 1 else { throw ArchiveError("gap before segment \(s.name)") }
                var stop = false
                for (k, bytes) in seg.entries.enumerated() where seg.first + UInt64(k) > replay.index {
                    let e: LogEntry
                    do { e = try LogEntry(decoding: bytes) } catch { throw ArchiveError("segment \(s.name), entry \(seg.first + UInt64(k)): \(error)") }
                    switch target {
                    case .index(let i): stop = e.index > i
                    case .time(let t): stop = e.timestamp > t
                    }
                    if stop { break }
                    replay.add(e, EmberStore.replayPrepared(e), bytes: bytes.count)
                    if replay.batch.count >= batchEntries || replay.batchBytes >= batchBytes { try await replay.send() }
                }
                if !seg.stateHash.isEmpty && replay.index == seg.last { lastHash = (seg.last, seg.stateHash) }
                if stop { break segments }
            }
            try await replay.send()
            try await replay.wait()
        } catch {
            // Nothing writes to `store` once this returns.
            try? await replay.wait()
            throw error
        }
        let index = replay.index
        // Ending on a base at a segment's end (nothing replayed): that segment's hash checks the base.
        if lastHash == nil, let s = catalog.segments.last(where: { $0.last == index }) {
            let seg = try segment(s, archive)
            if !seg.stateHash.isEmpty { lastHash = (index, seg.stateHash) }
        }
        let hash = try store.stateHash()
        var verified = false
        if let lastHash, lastHash.index == index {
            guard lastHash.hash == hash else {
                throw ArchiveError("the restored state at index \(index) has hash \(hash), the archive recorded \(lastHash.hash)")
            }
            verified = true
        }
        return Summary(base: plan.base.name, baseIndex: plan.base.first, entriesReplayed: replay.replayed, index: index,
                       timestamp: replay.timestamp, stateHash: hash, hashVerified: verified)
    }

    static func segment(_ s: ArchiveCatalog.Object, _ archive: any ArchiveStore) throws -> ArchiveSegment {
        let seg: ArchiveSegment
        do { seg = try ArchiveSegment(decoding: try archive.get(s.name)) } catch { throw ArchiveError("segment \(s.name): \(error)") }
        guard seg.name == s.name else { throw ArchiveError("segment \(s.name) holds \(seg.name)") }
        return seg
    }

    /// The replay's batches: at most one applying (on the store's writer thread) while the
    /// next is decoded, applied in order. `index`/`timestamp`/`replayed` count what was sent.
    struct Replay {
        let store: EmberStore
        var index: UInt64
        var timestamp: Int64
        var replayed = 0
        var batch: [LogEntry] = []
        /// Per entry, its nodes and tree keys built here instead of on the writer thread
        /// (`EmberStore.replayPrepared`).
        var prepared: [ReplayPrepared] = []
        var batchBytes = 0
        var applying: Task<Void, any Error>? = nil
        /// The batch applying, held here until it is waited for: its last reference then goes
        /// on this side, so its thousands of entries are freed here, not on the writer thread.
        var held: (entries: [LogEntry], prepared: [ReplayPrepared])? = nil

        mutating func add(_ e: LogEntry, _ built: ReplayPrepared, bytes: Int) {
            batch.append(e)
            prepared.append(built)
            batchBytes += bytes
            index = e.index
            timestamp = max(timestamp, e.timestamp)
            replayed += 1
        }

        /// Waits for the batch applying, then hands the writer this one.
        mutating func send() async throws {
            try await wait()
            guard !batch.isEmpty else { return }
            let (store, entries, prepared) = (self.store, batch, prepared)
            applying = Task { try await store.replayArchived(entries, prepared: prepared) }
            held = (entries, prepared)
            batch = []
            self.prepared = []
            batchBytes = 0
        }

        mutating func wait() async throws {
            guard let a = applying else { return }
            applying = nil
            defer { held = nil }
            try await a.value
        }
    }

    /// Checks every object of the archive: each segment's checksum and framing, each base's,
    /// and the index continuity. Returns the problems found (empty: all good) and the count.
    public static func verify(_ archive: any ArchiveStore) throws -> (checked: Int, problems: [String]) {
        let catalog = ArchiveCatalog(names: try archive.list())
        var problems: [String] = []
        var checked = 0
        for s in catalog.segments {
            checked += 1
            do { _ = try segment(s, archive) } catch { problems.append("\(error)") }
        }
        for b in catalog.bases {
            checked += 1
            let tmp = NSTemporaryDirectory() + "/ember-verify-\(UUID().uuidString)"
            defer { try? FileManager.default.removeItem(atPath: tmp) }
            do {
                try archive.getFile(b.name, to: tmp)
                let summary = try BackupFormat.verify(path: tmp)
                if summary.appliedIndex != b.first { problems.append("base \(b.name) holds index \(summary.appliedIndex)") }
            } catch { problems.append("base \(b.name): \(error)") }
        }
        for g in catalog.gaps { problems.append("gap: entries \(g.from)...\(g.to) are in no segment") }
        for (a, b) in catalog.overlaps { problems.append("overlap: \(a) and \(b) hold the same entries") }
        return (checked, problems)
    }
}
