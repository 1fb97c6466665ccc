import CLMDB
import EmberCore

/// Rewrites small objects still stored per leaf into `InlineObject` records, keeping everything
/// observable (values, versions and ETags of every path, shallow keys, queries, index rows, the
/// state hash) as it was. Per-leaf objects come from directories written before inline objects
/// existed and from snapshot streams, which are per leaf so that every version can install them
/// (`EmberStore.snapshot`): without this pass such a node keeps ~3× the tree bytes until each
/// object happens to be written again.
///
/// An object qualifies when it is not a namespace root, all its records are leaves one level
/// below it (plus its own priority record), `InlineObject.record` accepts it (count, size, key
/// lengths), no version row lies below it, and its version, every child's version and that of
/// any path below it that holds nothing are one and the same (its newest write was at it). Then
/// one record carrying that version, with no row at its key, answers every version lookup as the
/// rows did (`Tables.version`: the max of the ancestors' `at`, the path's `sub` and a record's own
/// version) — the state a write of the object at its own path leaves, which later writes inside
/// it already handle (`Applier.explode`).
enum Reinline {
    /// Objects rewritten per write transaction when a directory is migrated on open: bounds the
    /// transaction's dirty pages (a snapshot install rewrites in its own single transaction).
    static let objectsPerTransaction = 20_000
    /// Meta slot present once a directory's per-leaf objects were rewritten: the pass runs once.
    static let doneMetaKey = Array("layout/inline-objects".utf8)

    /// A run of leaf records under one parent, seen in key order.
    private struct Run {
        var parent: [UInt8]
        var priority: Priority?
        var children: [([UInt8], [UInt8])]
        /// False when a record below the parent other than its priority record came before the run.
        var clean: Bool

        /// Whether the run is the whole object, given the record after it (nil: the end).
        func isWholeObject(before next: [UInt8]?) -> Bool {
            clean && children.count <= InlineObject.maxChildren && !(next.map { bytesStart($0, with: parent) } ?? false)
        }
    }

    /// The migration a directory gets when it opens: every qualifying object rewritten, in write
    /// transactions of `objectsPerTransaction` objects, then `doneMetaKey` set so it is not scanned
    /// again. Interrupted, it starts over on the next open (already inline objects are skipped).
    static func migrate(_ env: OpaquePointer, _ tables: Tables) throws -> Int {
        var total = 0
        var from: [UInt8] = []
        while true {
            var p: OpaquePointer?
            try check(mdb_txn_begin(env, nil, 0, &p))
            guard let p else { throw StorageError.lmdb(code: -1, message: "mdb_txn_begin") }
            let t = Txn(ptr: p)
            let next: [UInt8]?
            do {
                if try t.get(tables.meta, doneMetaKey) != nil { mdb_txn_abort(p); return total }
                let (n, resume) = try pass(tables, t, from: from, maxObjects: objectsPerTransaction)
                total += n
                next = resume
                if next == nil { try t.put(tables.meta, doneMetaKey, [1]) }
            } catch {
                mdb_txn_abort(p)
                throw error
            }
            try check(mdb_txn_commit(p))
            guard let next else { return total }
            from = next
        }
    }

    /// Rewrites every qualifying object in one transaction; returns how many.
    @discardableResult
    static func all(_ tables: Tables, _ t: Txn) throws -> Int {
        var total = 0
        var from: [UInt8] = []
        while true {
            let (n, next) = try pass(tables, t, from: from, maxObjects: objectsPerTransaction)
            total += n
            guard let next else { return total }
            from = next
        }
    }

    /// Scans `tree` from `start`, rewriting at most `maxObjects` objects; returns how many and the
    /// key to go on from (nil when the scan reached the end).
    static func pass(_ tables: Tables, _ t: Txn, from start: [UInt8], maxObjects: Int) throws -> (rewritten: Int, resume: [UInt8]?) {
        precondition(maxObjects > 0, "a pass must be allowed to rewrite something")
        var candidates: [Run] = []
        var resume: [UInt8]? = nil
        do {
            // The record before `start` decides whether a run beginning at `start` is clean.
            var prev: ([UInt8], [UInt8])? = nil
            if !start.isEmpty {
                var back = try t.cursor(tables.treeS, within: [])
                defer { back.close() }
                prev = try back.seekLastLT(start)
            }
            var c = try t.cursor(tables.treeS, within: [])
            defer { c.close() }
            var run: Run? = nil
            var entry = try c.seek(start)
            while let (k, v) = entry {
                let parent = (v.first == 1 || v.first == 3) ? parentKey(k) : nil
                if let parent, run != nil, run!.parent == parent, run!.children.count <= InlineObject.maxChildren {
                    run!.children.append((k, v))
                } else {
                    if let r = run, r.isWholeObject(before: k) {
                        candidates.append(r)
                        if candidates.count == maxObjects { resume = k; break }
                    }
                    run = nil
                    if let parent {
                        var r = Run(parent: parent, priority: nil, children: [(k, v)], clean: true)
                        if let (pk, pv) = prev, bytesStart(pk, with: parent) {
                            if pk == parent, case .priority(let p) = try TreeRecord.decode(pv) { r.priority = p } else { r.clean = false }
                        }
                        run = r
                    }
                }
                prev = (k, v)
                entry = try c.next()
            }
            if resume == nil, let r = run, r.isWholeObject(before: nil) { candidates.append(r) }
        }
        var rewritten = 0
        for r in candidates where try rewrite(r, tables, t) { rewritten += 1 }
        return (rewritten, resume)
    }

    /// The key of the parent of the record at `k`, or nil when that parent is a namespace root
    /// (never inline) or the key is not a tree key.
    static func parentKey(_ k: [UInt8]) -> [UInt8]? {
        guard let path = EncodedPath(key: k), path.ends.count >= 3 else { return nil }
        return path.ancestor(path.ends.count - 2)
    }

    /// Rewrites one run if it qualifies (the checks that need reads); returns whether it did.
    private static func rewrite(_ r: Run, _ tables: Tables, _ t: Txn) throws -> Bool {
        // A version row below the object (a deleted or rewritten descendant) would be dropped
        // by the record's invariant (nothing below it): such objects stay per leaf.
        if try t.hasPrefix(tables.verS, r.parent + [0x01]) || t.hasPrefix(tables.verS, r.parent + [0x02]) { return false }
        guard let parentPath = EncodedPath(key: r.parent) else { return false }
        // Versions (`Tables.version`), read once. No leaf or inline record lies on the path to the
        // object (it has children) and no version row below it (checked above), so the object's
        // version is max(newest `at` of it and its ancestors, its `sub`), a child's is max(that
        // newest `at`, the child record's own version), and so is any empty path below it, without
        // the child's. They are all one version — the record's — when neither the object's `sub`
        // nor a child's own version is newer than that `at`: the object's newest write was at it
        // (not a child written or deleted later), as a write at its own path would leave it.
        let row = try tables.versionRecord(t, r.parent)
        var newestAt = row.at
        for level in 0..<(parentPath.ends.count - 1) {
            newestAt = max(newestAt, try tables.versionRecord(t, parentPath.ancestor(level)).at)
        }
        guard row.sub <= newestAt else { return false }
        var kids: KeyMap<Node> = [:]
        kids.reserveCapacity(r.children.count)
        for (k, v) in r.children {
            guard try (TreeRecord.version(v) ?? 0) <= newestAt else { return false }
            var i = r.parent.count
            guard let name = KeyCodec.readSegment(k, &i), case .leaf(let l, let p) = try TreeRecord.decode(v) else { return false }
            kids[name] = Node(l, priority: p)
        }
        let node = Node(children: kids, priority: r.priority)
        guard let record = InlineObject.record(for: node, key: r.parent, version: newestAt) else { return false }
        for (k, _) in r.children { try t.delete(tables.treeS, k) }
        try t.put(tables.treeS, r.parent, record)  // replaces the object's priority record, if any
        _ = try t.delete(tables.verS, r.parent)
        return true
    }
}

extension EncodedPath {
    /// The encoded path of a tree key (`namespace\0` + segments); nil when it is not one.
    init?(key: [UInt8]) {
        guard let nsEnd = key.firstIndex(of: 0).map({ $0 + 1 }) else { return nil }
        var e = [nsEnd]
        var i = nsEnd
        while i < key.count {
            guard KeyCodec.readSegment(key, &i) != nil else { return nil }
            e.append(i)
        }
        self.init(bytes: key, ends: e)
    }
}
