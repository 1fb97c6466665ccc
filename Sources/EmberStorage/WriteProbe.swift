import CLMDB
import EmberCore
import Foundation

/// What a set finds at its key before it writes, from ONE cursor positioning: the old value
/// (`Tables.readNodeRecord`) and the leaf or inline object above the key (`Tables.leafOnPath`,
/// strictly above), which take up to four B-tree descents and three cursors between them when
/// the key holds nothing — the common case of a restore replaying new children (issue 37).
/// Used by every set (issue 38: an overwritten leaf is then one descent, its new record put
/// through the cursor) and by the restore-only replay's update parts (`Applier.replaying`);
/// the replay's state is compared row for row with the plain reads' (`ArchiveReplayTests`).
struct WriteProbe {
    let node: Node
    /// `node` is a leaf in its own record at the key (`readNodeRecord`'s `leafRecord`).
    let leafRecord: Bool
    /// When `node` is empty: what `leafOnPath(key, includingSelf: false)` returns.
    let leafAbove: (key: [UInt8], record: [UInt8])?
    /// The cursor on `tree` left next to the key: while the tree is unchanged, a put of the
    /// key through it searches only its page when the key falls inside it (LMDB's
    /// `mdb_cursor_set` starts from an initialized cursor's page). The caller closes it,
    /// unless it passed it in (`probeWrite`'s `using`).
    let cursor: Cursor
    /// No record at or after the key: it sorts past the table's last key, and a put of it
    /// may append (`Cursor.put`'s `append`).
    var pastEnd = false
}

extension Tables {
    /// nil where the one positioning does not answer exactly — a key past `SplitTable.inlineBytes`,
    /// overflow rows in the tree (they sort apart from `tree`'s), records below the key, or a
    /// priority record at it: the caller reads as the write path does.
    /// `using`: an open cursor on `tree` to position (the replay's, `ReplayCursors`: left open,
    /// and its positioning searches from its page), or nil: one is opened for the probe.
    func probeWrite(_ t: Txn, _ encoded: EncodedPath, using open: Cursor? = nil) throws -> WriteProbe? {
        let key = encoded.bytes
        guard key.count <= SplitTable.inlineBytes, !treeS.used.mayHaveRows else { return nil }
        if let open { return try probe(open, encoded) }
        let c = try t.cursor(tree)
        do {
            guard let probe = try probe(c, encoded) else {
                c.close()
                return nil
            }
            return probe
        } catch {
            c.close()
            throw error
        }
    }

    private func probe(_ c: Cursor, _ encoded: EncodedPath) throws -> WriteProbe? {
        let key = encoded.bytes
        // Both records are read in place: a new key (a replay's common case) copies neither.
        // The first record at or after the key: the key's own, a descendant's, or a later one.
        enum AtOrAfter { case own([UInt8]), below, later }
        let after = try c.inPlace(MDB_SET_RANGE, key: key) { k, v -> AtOrAfter in
            guard Self.starts(k, with: key) else { return .later }
            return k.count == key.count ? .own(Array(v)) : .below
        }
        switch after {
        case .below?: return nil
        case .own(let v)?:
            switch try TreeRecord.decode(v) {
            // A leaf or an inline object has no records below it.
            case .leaf(let l, let p): return WriteProbe(node: Node(l, priority: p), leafRecord: true, leafAbove: nil, cursor: c)
            case .inline(let o): return WriteProbe(node: o.node, leafRecord: false, leafAbove: nil, cursor: c)
            case .priority: return nil
            }
        case .later?, nil: break
        }
        // Nothing at or below the key. The record just before it is the only one that can be a
        // leaf or an inline object above it (nothing sorts between those and their descendants):
        // `inlineAbove`'s and `leafOnPath`'s record.
        let before = try c.inPlace(after != nil ? MDB_PREV : MDB_LAST) { k, v -> ([UInt8], [UInt8])? in
            guard k.count >= encoded.ends[0], k.count < key.count, Self.starts(key, with: k),
                  let f = v.first, f == 1 || f == 3 || f == InlineObject.tag else { return nil }
            return (Array(k), Array(v))
        }
        guard let (k, v) = before ?? nil else {
            return WriteProbe(node: .empty, leafRecord: false, leafAbove: nil, cursor: c, pastEnd: after == nil)
        }
        if v.first == InlineObject.tag {
            // The key may be a child of the inline object (`inlineLeaf`).
            var i = k.count
            guard let s = KeyCodec.readSegment(key, &i) else { throw StorageError.corrupt("tree key") }
            if i == key.count, let child = try InlineObject.decode(v).child(s) {
                return WriteProbe(node: Node(child.leaf, priority: child.priority), leafRecord: false, leafAbove: nil, cursor: c)
            }
        }
        return WriteProbe(node: .empty, leafRecord: false, leafAbove: (k, v), cursor: c, pastEnd: after == nil)
    }

    /// Whether `a` begins with `p` (one of them a key read in place in LMDB's map).
    private static func starts(_ a: UnsafeRawBufferPointer, with p: [UInt8]) -> Bool {
        guard a.count >= p.count else { return false }
        return p.withUnsafeBytes { y in p.isEmpty || memcmp(a.baseAddress!, y.baseAddress!, p.count) == 0 }
    }

    private static func starts(_ a: [UInt8], with p: UnsafeRawBufferPointer) -> Bool {
        guard a.count >= p.count else { return false }
        return a.withUnsafeBytes { x in p.isEmpty || memcmp(x.baseAddress!, p.baseAddress!, p.count) == 0 }
    }
}
