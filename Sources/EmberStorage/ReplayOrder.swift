import EmberCore
import EmberRules

/// The order the restore-only replay applies a batch in (`Writer.replay`), planned on the
/// decoding side (`ArchiveRestore.Replay.send`) while the writer applies the batch before.
///
/// A replayed window interleaves many parents (the bench: 64), and the replay's writer kept a
/// `tree` cursor per parent (`ReplayCursors`) so a write did not search the B-tree from its
/// root; but LMDB walks every open cursor of a table on each insert and split (its cursor
/// fix-ups), which with 64 cursors ate much of what they saved. Applied in key order instead,
/// one cursor walks forward: each write lands on the page the last one left, and no other
/// cursor is open to fix up.
///
/// Only where the order cannot change the state: a `run` is a stretch of consecutive entries
/// that are each a plain set (no writer stamp, no condition) of a leaf value (its record built
/// here, `ReplayPrepared.leafRecord`) at a non-root path, with no path twice and none an
/// ancestor of another (so no write reads or replaces what another wrote: each puts its own
/// record with its own index as version, and raises ancestors' `sub`, which keeps the
/// largest, `PendingVersions`). A delete, an object, an update or any other entry ends a run.
/// What the namespace's state decides (rules that read data, triggers, query indexes) the
/// writer checks when it applies the run (`Applier.reorderable`), applying it in log order
/// otherwise.
struct ReplayOrder: Sendable, Equatable {
    /// The batch's positions in application order: `order[i] == i` outside `runs`; inside a
    /// run, the run's own positions, permuted.
    var order: [Int32]
    /// The runs, as ranges of positions in the batch (and of `order`), ascending.
    var runs: [Range<Int>]

    /// Runs shorter than this stay in log order (nothing to walk).
    static let minRun = 8

    /// Whether entry `e`, prepared as `p`, may be moved within a run.
    static func movable(_ e: LogEntry, _ p: ReplayPrepared) -> Bool {
        guard e.writer == nil, case .set(let path, _, let cond) = e.operation, cond == nil, !path.isRoot else { return false }
        return p.leafRecord != nil && p.keys?.count == 1
    }

    /// The plan for a batch: each maximal stretch of movable entries grouped by parent (parents
    /// in key order, each parent's keys ascending: a window's new keys mostly arrive so, and are
    /// sorted when not); a stretch with a path twice or a path above another stays in order.
    static func plan(_ entries: [LogEntry], _ prepared: [ReplayPrepared]) -> ReplayOrder {
        precondition(entries.count == prepared.count, "one prepared slot per entry")
        precondition(entries.count <= Int(Int32.max), "a batch's positions fit Int32")
        var out = ReplayOrder(order: (0..<Int32(entries.count)).map { $0 }, runs: [])
        var start = 0
        while start < entries.count {
            guard movable(entries[start], prepared[start]) else {
                start += 1
                continue
            }
            var end = start + 1
            while end < entries.count, movable(entries[end], prepared[end]) { end += 1 }
            if end - start >= minRun, let walk = walk(prepared, start..<end) {
                out.order.replaceSubrange(start..<end, with: walk)
                out.runs.append(start..<end)
            }
            start = end
        }
        return out
    }

    /// The key order of a stretch of movable entries, or nil when two of its paths are equal
    /// or one is above another.
    private static func walk(_ prepared: [ReplayPrepared], _ range: Range<Int>) -> [Int32]? {
        // Grouped by parent, in the order parents first appear.
        var groupOf: [PendingVersions.Key: Int] = [:]
        var groups: [(parent: [UInt8], members: [Int32])] = []
        var above = Set<PendingVersions.Key>()
        var deepest = 0
        for i in range {
            let key = prepared[i].keys![0]
            let parent = PendingVersions.Key(bytes: key.ancestorSlice(key.ends.count - 2))
            if let g = groupOf[parent] {
                groups[g].members.append(Int32(i))
                continue
            }
            groupOf[parent] = groups.count
            groups.append((Array(parent.bytes), [Int32(i)]))
            // A path above another is the other's parent or one of its ancestors.
            for level in 0..<(key.ends.count - 1) { above.insert(PendingVersions.Key(bytes: key.ancestorSlice(level))) }
            deepest = max(deepest, key.ends.count - 2)
        }
        // Only paths as short as the deepest parent can be one (the root is no entry's path).
        for i in range {
            let key = prepared[i].keys![0]
            if key.ends.count - 1 <= deepest, above.contains(PendingVersions.Key(bytes: key.bytes[...])) { return nil }
        }
        // Each parent's keys ascending, none twice.
        for g in groups.indices {
            var ascending = true
            for (a, b) in zip(groups[g].members, groups[g].members.dropFirst()) where !bytesLess(prepared[Int(a)].keys![0].bytes, prepared[Int(b)].keys![0].bytes) {
                ascending = false
                break
            }
            guard !ascending else { continue }
            groups[g].members.sort { bytesLess(prepared[Int($0)].keys![0].bytes, prepared[Int($1)].keys![0].bytes) }
            for (a, b) in zip(groups[g].members, groups[g].members.dropFirst()) where prepared[Int(a)].keys![0].bytes == prepared[Int(b)].keys![0].bytes {
                return nil
            }
        }
        // Parents in key order: the walk moves forward through the table.
        groups.sort { bytesLess($0.parent, $1.parent) }
        var walk: [Int32] = []
        walk.reserveCapacity(range.count)
        for g in groups { walk.append(contentsOf: g.members) }
        assert(walk.count == range.count, "every entry of the run once")
        return walk
    }
}

extension Applier {
    /// Whether the namespace's state lets `e` (a movable set, `ReplayOrder.movable`) apply out
    /// of log order: no triggers (a write's change records follow the log), no query indexes,
    /// and a rules verdict that reads no data (an admin's write, no rules, or a constant
    /// `true` `.write` on its path with no `.validate`: `writeGrantedWithoutEvaluation`).
    mutating func reorderable(_ e: LogEntry) throws -> Bool {
        guard case .set(let path, _, _) = e.operation else { return false }
        let ns = e.namespace
        if let set = triggers[ns], !set.isEmpty { return false }
        if try !defs(ns).isEmpty { return false }
        guard case .user = e.auth, let engine = rules.engine(for: ns) else { return true }
        return engine.writeGrantedWithoutEvaluation(at: [path])
    }
}
