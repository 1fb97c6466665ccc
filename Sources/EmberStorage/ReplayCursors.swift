import CLMDB
import EmberCore

/// Cursors the restore-only replay (`Applier.replaying`) keeps open for its whole flat
/// transaction, so a write does not search the B-tree from its root (issue 37: that search
/// was ~30 % of the replay's writer thread). A replayed window's new keys arrive in ascending
/// order within each parent (push ids; the bench's `k<i>` within a digit count), many
/// parents interleaved: each parent keeps the `tree` cursor its last write left next to its
/// key, and LMDB's positioning (`mdb_cursor_set`) searches only that cursor's leaf page when
/// the next key falls inside it. One `ver` cursor serves the version rows' prefix deletes the
/// same way. LMDB tracks every cursor of a write transaction and keeps them valid through the
/// other cursors' puts, deletes, splits and merges; each positioning here starts from a key
/// (`MDB_SET_RANGE`), never from where the cursor was. A parent's entry also keeps its
/// ancestors' pending version slots (`PendingVersions.chain(of:)`), so a write raises them
/// without looking them up.
///
/// Within a run the replay applies in key order (`ReplayOrder`, between `beginWalk` and
/// `endWalk`) every parent is served by one shared cursor instead: it walks forward, and no
/// per-parent cursor stays open for LMDB to fix up on each insert.
///
/// Closed by `close()` before the transaction ends (LMDB frees a write transaction's cursors
/// at its end: closing one afterwards would free it twice).
final class ReplayCursors {
    /// Parents kept at once (their cursors and version chains): LMDB adjusts every open cursor
    /// of a table on each insert and split (a loop over them), so their number stays small;
    /// past it, all are closed and the next writes open new ones.
    static let maxParents = 256

    final class Parent {
        /// The cursor this parent's write positions: its own, or the walk's during a run.
        fileprivate(set) var cursor: Cursor
        /// The parent's own cursor, opened on its first write outside a walk.
        fileprivate var own: Cursor?
        /// The parent's ancestors' pending slots (levels 0 ... the parent) and the
        /// `PendingVersions.generation` they were taken at (nil: none taken yet).
        var chain: [PendingVersions.Slot] = []
        var generation: UInt64? = nil
        fileprivate init(_ cursor: Cursor, own: Cursor?) {
            self.cursor = cursor
            self.own = own
        }
    }

    private let t: Txn
    private let tables: Tables
    private var parents: [PendingVersions.Key: Parent] = [:]
    private var ver: Cursor?
    /// The shared cursor of the runs applied in key order, opened on the first.
    private var walkCursor: Cursor?
    private(set) var walking = false
    private var closed = false

    init(_ t: Txn, _ tables: Tables) {
        self.t = t
        self.tables = tables
    }

    /// The entry of the parent of the key `encoded` (a key with at least one segment), its
    /// `cursor` the walk's during a run, else its own (opened on first use).
    func parent(of encoded: EncodedPath) throws -> Parent {
        precondition(!closed, "replay cursors used after their transaction ended")
        precondition(encoded.ends.count >= 2, "a key below the root")
        let k = PendingVersions.Key(bytes: encoded.ancestorSlice(encoded.ends.count - 2))
        if let p = parents[k] {
            if walking {
                p.cursor = walkCursor!
            } else if let own = p.own {
                p.cursor = own
            } else {
                let c = try t.cursor(tables.tree)
                p.own = c
                p.cursor = c
            }
            return p
        }
        if parents.count >= Self.maxParents { closeParents() }
        let p: Parent
        if walking { p = Parent(walkCursor!, own: nil) } else {
            let c = try t.cursor(tables.tree)
            p = Parent(c, own: c)
        }
        parents[k] = p
        return p
    }

    /// Starts a run applied in key order: the parents' own cursors are closed (their chains
    /// stay), and every parent's write positions the one walk cursor until `endWalk`.
    func beginWalk() throws {
        precondition(!closed, "replay cursors used after their transaction ended")
        precondition(!walking, "one walk at a time")
        if walkCursor == nil { walkCursor = try t.cursor(tables.tree) }
        for p in parents.values {
            p.own?.close()
            p.own = nil
            p.cursor = walkCursor!
        }
        walking = true
    }

    func endWalk() {
        walking = false
    }

    /// The cursor on `ver`'s main table, opened on first use.
    func verCursor() throws -> Cursor {
        precondition(!closed, "replay cursors used after their transaction ended")
        if let ver { return ver }
        let c = try t.cursor(tables.ver)
        ver = c
        return c
    }

    /// How many cursors on `tree` are open (the parents' own and the walk's).
    var openTreeCursors: Int { parents.values.filter { $0.own != nil }.count + (walkCursor == nil ? 0 : 1) }

    private func closeParents() {
        for p in parents.values { p.own?.close() }
        parents.removeAll(keepingCapacity: true)
    }

    /// Closes every cursor; call before the transaction commits or aborts.
    func close() {
        guard !closed else { return }
        closeParents()
        walkCursor?.close()
        walkCursor = nil
        ver?.close()
        ver = nil
        closed = true
    }
}
