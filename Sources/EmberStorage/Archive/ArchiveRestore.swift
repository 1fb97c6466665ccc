import Foundation

/// Point-in-time restore: the newest base at or before the target, then the archived entries
/// after it up to the last one at or before the target, applied by the store's own apply path
/// (server values, rules and conditions resolve as they did: every input is in the entry).
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

    /// Entries applied per store transaction during the replay.
    public static let replayBatch = 2_000

    /// One pass: the plan from the listing (a gap or a target outside the window fails before
    /// anything is installed), then the base, then each segment fetched and decoded once and
    /// replayed. A segment found corrupt (its whole checksum is checked before any of its
    /// entries is applied) or holding another range fails the restore with `store` holding a
    /// state older than the target: the caller discards it (`ember restore` restores into a
    /// staging directory and moves the result into place only on success).
    public static func restore(from archive: any ArchiveStore, to target: ArchiveCatalog.Target, into store: EmberStore,
                               scratchFile: String) async throws -> Summary {
        let catalog = ArchiveCatalog(names: try archive.list())
        let plan = try catalog.plan(target)
        try archive.getFile(plan.base.name, to: scratchFile)
        defer { try? FileManager.default.removeItem(atPath: scratchFile) }
        do { _ = try BackupFormat.verify(path: scratchFile) } catch { throw ArchiveError("base \(plan.base.name): \(error)") }
        let installed = try await store.restoreBackup(from: scratchFile)
        guard installed.appliedIndex == plan.base.first else {
            throw ArchiveError("base \(plan.base.name) holds index \(installed.appliedIndex), not \(plan.base.first)")
        }
        var index = plan.base.first
        var timestamp = plan.base.lastTimestamp
        var replayed = 0
        var lastHash: (index: UInt64, hash: String)? = nil
        segments: for s in plan.segments {
            let seg = try segment(s, archive)
            guard seg.first <= index + 1 else { throw ArchiveError("gap before segment \(s.name)") }
            var batch: [LogEntry] = []
            var stop = false
            for (k, bytes) in seg.entries.enumerated() where seg.first + UInt64(k) > index + UInt64(batch.count) {
                let e: LogEntry
                do { e = try LogEntry(decoding: bytes) } catch { throw ArchiveError("segment \(s.name), entry \(seg.first + UInt64(k)): \(error)") }
                switch target {
                case .index(let i): stop = e.index > i
                case .time(let t): stop = e.timestamp > t
                }
                if stop { break }
                batch.append(e)
                if batch.count == replayBatch { try await apply(&batch, store, &index, &timestamp, &replayed) }
            }
            try await apply(&batch, store, &index, &timestamp, &replayed)
            if !seg.stateHash.isEmpty && index == seg.last { lastHash = (seg.last, seg.stateHash) }
            if stop { break segments }
        }
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
        return Summary(base: plan.base.name, baseIndex: plan.base.first, entriesReplayed: replayed, index: index,
                       timestamp: timestamp, stateHash: hash, hashVerified: verified)
    }

    static func segment(_ s: ArchiveCatalog.Object, _ archive: any ArchiveStore) throws -> ArchiveSegment {
        let seg: ArchiveSegment
        do { seg = try ArchiveSegment(decoding: try archive.get(s.name)) } catch { throw ArchiveError("segment \(s.name): \(error)") }
        guard seg.name == s.name else { throw ArchiveError("segment \(s.name) holds \(seg.name)") }
        return seg
    }

    static func apply(_ batch: inout [LogEntry], _ store: EmberStore, _ index: inout UInt64, _ timestamp: inout Int64,
                      _ replayed: inout Int) async throws {
        guard let last = batch.last else { return }
        try await store.appendAndApply(entries: batch, through: last.index, validated: true)
        replayed += batch.count
        index = last.index
        timestamp = max(timestamp, batch.map(\.timestamp).max() ?? 0)
        batch.removeAll(keepingCapacity: true)
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
