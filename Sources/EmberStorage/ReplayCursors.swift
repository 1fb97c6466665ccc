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
/// Closed by `close()` before the transaction ends (LMDB frees a write transaction's cursors
/// at its end: closing one afterwards would free it twice).
final class ReplayCursors {
    /// Parents whose cursors stay open at once: LMDB adjusts every open cursor of a table on
    /// each insert and split (a loop over them), so their number stays small; past it, all
    /// are closed and the next writes open new ones.
    static let maxParents = 256

    final class Parent {
        let cursor: Cursor
        /// The parent's ancestors' pending slots (levels 0 ... the parent) and the
        /// `PendingVersions.generation` they were taken at (nil: none taken yet).
        var chain: [PendingVersions.Slot] = []
        var generation: UInt64? = nil
        init(_ cursor: Cursor) { self.cursor = cursor }
    }

    private let t: Txn
    private let tables: Tables
    private var parents: [PendingVersions.Key: Parent] = [:]
    private var ver: Cursor?
    private var closed = false

    init(_ t: Txn, _ tables: Tables) {
        self.t = t
        self.tables = tables
    }

    /// The entry of the parent of the key `encoded` (a key with at least one segment), with
    /// its `tree` cursor opened on first use.
    func parent(of encoded: EncodedPath) throws -> Parent {
        precondition(!closed, "replay cursors used after their transaction ended")
        precondition(encoded.ends.count >= 2, "a key below the root")
        let k = PendingVersions.Key(bytes: encoded.ancestorSlice(encoded.ends.count - 2))
        if let p = parents[k] { return p }
        if parents.count >= Self.maxParents { closeParents() }
        let p = Parent(try t.cursor(tables.tree))
        parents[k] = p
        return p
    }

    /// The cursor on `ver`'s main table, opened on first use.
    func verCursor() throws -> Cursor {
        precondition(!closed, "replay cursors used after their transaction ended")
        if let ver { return ver }
        let c = try t.cursor(tables.ver)
        ver = c
        return c
    }

    private func closeParents() {
        for p in parents.values { p.cursor.close() }
        parents.removeAll(keepingCapacity: true)
    }

    /// Closes every cursor; call before the transaction commits or aborts.
    func close() {
        guard !closed else { return }
        closeParents()
        ver?.close()
        ver = nil
        closed = true
    }
}
