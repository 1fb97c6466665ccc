import CLMDB
import EmberCore

/// Named databases of the environment and the record logic shared by readers and the writer.
///
/// * `tree`:   ns\0 + path encoding → `TreeRecord` (leaves; interior priorities at the node's own key;
///   a small object written whole: one `InlineObject` record at its key, nothing below it)
/// * `ver`:    ns\0 + path encoding → sub (u64) + at (u64), see `version` (a leaf written at its own
///   path keeps both in its tree record instead: `TreeRecord.leaf(_:_:version:)`)
/// * `idx`:    location id (`IndexLocations`) + index value encoding + child segment → nothing
///   (the key holds the value), or for a string cut in the key: child key offset (u16) + exact value (`IndexRowValue`)
///   (no reverse table: a write finds a child's old row from its old value, `Applier.entriesBelow`;
///   data directories from before keep an `idxrev` table, dropped when they open: `dropLegacyTables`)
/// * `idxloc`: location key (ns\0 + def id (8) + location encoding) → its location id: the prefix
///   every row of that location shares in `idx` (storage format 4; before, rows began with the
///   location key itself)
/// * `log`:    index (u64 BE) → `LogEntry.encoded()`
/// * `log2` … `log32`: the same, the other tables of a single archiving node's ring of log
///   tables (`LogRing`; `log` is its first)
/// * `meta`:   named slots (applied index, last log index/term, first log index, hard state, index definitions)
/// * `trigrec`: index (u64 BE) + group (u64) + ns → a trigger group's shared change record
///   (`TriggerRecordRows`; storage format 7, before in `meta` under `triggers/r/`)
///
/// `tree`, `ver`, `idx` and `idxloc` keep keys of up to 480 bytes; longer keys (long paths: Firebase
/// allows 32 levels of 768-byte keys) go to their overflow twins `treex`, `verx`, `idxx`, `idxlocx`
/// (see `SplitTable`). Everything below reads and writes the pairs through `treeS`, `verS`, …
struct Tables {
    let tree: MDB_dbi
    let ver: MDB_dbi
    let idx: MDB_dbi
    let log: MDB_dbi
    let log2: MDB_dbi
    /// `log`, `log2`, … (`LogRing.tableCount` tables; `log` and `log2` are its first two).
    let logRing: [MDB_dbi]
    let meta: MDB_dbi
    let treex: MDB_dbi
    let verx: MDB_dbi
    let idxx: MDB_dbi
    let idxloc: MDB_dbi
    let idxlocx: MDB_dbi
    /// The trigger groups' shared change records (`TriggerRecordRows`, storage format 7).
    let trigrec: MDB_dbi

    let overflowUse = [OverflowUse(false), OverflowUse(false), OverflowUse(false), OverflowUse(false)]
    /// Whether writes store small objects as `InlineObject` records (`StoreOptions.inlineObjects`).
    /// Reads understand both forms either way.
    var inlineObjects = true
    /// Whether a bulk write puts its tree records in key order with MDB_APPEND
    /// (`StoreOptions.orderedRecords`).
    var orderedRecords = true
    /// Whether a text update writes the records of parts over nothing straight from their text,
    /// without their nodes (`StoreOptions.textRecords`, `Applier.writeText`).
    var textRecords = true

    var treeS: SplitTable { SplitTable(main: tree, over: treex, used: overflowUse[0]) }
    var verS: SplitTable { SplitTable(main: ver, over: verx, used: overflowUse[1]) }
    var idxS: SplitTable { SplitTable(main: idx, over: idxx, used: overflowUse[2]) }
    var idxlocS: SplitTable { SplitTable(main: idxloc, over: idxlocx, used: overflowUse[3]) }

    /// Opens (creating what an older data directory lacks, such as the overflow twins) the
    /// named databases in the write transaction `t`.
    static func open(_ t: OpaquePointer, inlineObjects: Bool, orderedRecords: Bool = true, textRecords: Bool = true) throws -> Tables {
        func open(_ name: String) throws -> MDB_dbi {
            var dbi: MDB_dbi = 0
            try check(mdb_dbi_open(t, name, flag(MDB_CREATE), &dbi))
            return dbi
        }
        let (tree, ver, idx, log, log2, meta) = (try open("tree"), try open("ver"), try open("idx"),
                                                 try open("log"), try open("log2"), try open("meta"))
        let (treex, verx, idxx, idxloc, idxlocx) = (try open("treex"), try open("verx"), try open("idxx"),
                                                    try open("idxloc"), try open("idxlocx"))
        // The ring's other tables after the rest: every other table keeps the handle it had.
        let others = try (2..<LogRing.tableCount).map { try open(LogRing.tableName($0)) }
        let trigrec = try open(TriggerRecordRows.tableName)
        let ring = [log, log2] + others
        return Tables(tree: tree, ver: ver, idx: idx, log: log, log2: log2, logRing: ring, meta: meta,
                      treex: treex, verx: verx, idxx: idxx, idxloc: idxloc, idxlocx: idxlocx, trigrec: trigrec,
                      inlineObjects: inlineObjects, orderedRecords: orderedRecords, textRecords: textRecords)
    }

    /// Marks the overflow tables that hold rows as used (on open, after installing a snapshot).
    func noteOverflowRows(_ t: Txn) throws {
        for (dbi, use) in zip([treex, verx, idxx, idxlocx], overflowUse) where try t.overflowRows(dbi) > 0 {
            use.markUsed()
        }
    }

    /// Tables of earlier formats, dropped when a data directory opens (their pages go to the
    /// free list; `ember compact` gives the disk back): `idxrev`/`idxrevx`, the reverse index
    /// (child → its `idx` key) kept until the old row's key was derived from the old value.
    static let legacyTables = ["idxrev", "idxrevx"]

    /// Drops the `legacyTables` present in `txn` (a write transaction); returns their names.
    static func dropLegacyTables(_ txn: OpaquePointer) throws -> [String] {
        var dropped: [String] = []
        for name in legacyTables {
            var dbi: MDB_dbi = 0
            let rc = mdb_dbi_open(txn, name, 0, &dbi)
            if rc == MDB_NOTFOUND { continue }
            try check(rc)
            try check(mdb_drop(txn, dbi, 1))
            dropped.append(name)
        }
        return dropped
    }

    static func treeKey(_ ns: String, _ path: Path) -> [UInt8] {
        KeyCodec.namespacePrefix(ns) + KeyCodec.encode(path)
    }

    // MARK: - Tree reads

    final class Builder {
        var leaf: Leaf?
        var priority: Priority?
        var kids: KeyMap<Builder> = [:]

        func node() -> Node {
            if let leaf { return Node(leaf, priority: priority) }
            var d: KeyMap<Node> = [:]
            d.reserveCapacity(kids.count)
            for (k, v) in kids { d[k] = v.node() }
            return Node(children: d, priority: priority)
        }
    }

    /// The subtree at `key` (a tree key): one cursor range scan, refused once it has scanned
    /// more than `maxBytes` of stored keys and values.
    func readNode(_ t: Txn, key: [UInt8], maxBytes: Int = .max) throws -> Node {
        try readNodeRecord(t, key: key, maxBytes: maxBytes).node
    }

    /// `readNode`, and whether the node is a leaf in its own record at `key` (not a child of an
    /// inline object): a write that puts another record at `key` then overwrites it in place.
    func readNodeRecord(_ t: Txn, key: [UInt8], maxBytes: Int = .max) throws -> (node: Node, leafRecord: Bool) {
        // A leaf has no descendants, so when there is one a point read answers: cheaper than a
        // cursor scan (no cursor, no builder) for the common overwrite of a leaf, and for a long
        // key it spares reading its whole overflow group.
        if let v = try t.get(treeS, key) {
            switch try TreeRecord.decode(v) {
            case .leaf(let l, let p):
                if key.count + v.count > maxBytes { throw StorageError.readTooLarge(limit: maxBytes) }
                return (Node(l, priority: p), true)
            case .inline(let o):
                if key.count + v.count > maxBytes { throw StorageError.readTooLarge(limit: maxBytes) }
                return (o.node, false)
            case .priority: break
            }
        }
        let root = Builder()
        var found = false
        var scanned = 0
        try t.scan(treeS, prefix: key) { k, v in
            found = true
            scanned += k.count + v.count
            if scanned > maxBytes { throw StorageError.readTooLarge(limit: maxBytes) }
            var b = root
            var i = key.count
            while i < k.count {
                guard let s = KeyCodec.readSegment(k, &i) else { throw StorageError.corrupt("tree key") }
                if let next = b.kids[s] { b = next } else { let n = Builder(); b.kids[s] = n; b = n }
            }
            switch try TreeRecord.decode(v) {
            case .leaf(let l, let p): b.leaf = l; b.priority = p
            case .priority(let p): b.priority = p
            case .inline(let o):
                b.priority = o.priority
                for c in o.children {
                    let n = Builder()
                    n.leaf = c.leaf; n.priority = c.priority
                    b.kids[c.key] = n
                }
            }
            return true
        }
        if found { return (root.node(), false) }
        // Nothing at or below `key`: it may be a child of an inline object (or lie below one).
        return (try inlineLeaf(t, key: key) ?? .empty, false)
    }

    // MARK: - Inline objects

    /// The inline object record strictly above `key` (there is at most one, and nothing sorts
    /// between it and `key`: one seek), as its key and value. Inline records are never in the
    /// overflow table (`InlineObject`).
    func inlineAbove(_ t: Txn, key: [UInt8]) throws -> ([UInt8], [UInt8])? {
        let c = try t.cursor(tree)
        defer { c.close() }
        guard let (k, v) = try c.seekLastLT(key), v.first == InlineObject.tag, k.count < key.count,
              bytesStart(key, with: k) else { return nil }
        return (k, v)
    }

    /// The child of an inline object at `key` (as a leaf node), or nil when `key` is not one.
    func inlineLeaf(_ t: Txn, key: [UInt8]) throws -> Node? {
        guard let (k, v) = try inlineAbove(t, key: key) else { return nil }
        var i = k.count
        guard let s = KeyCodec.readSegment(key, &i) else { throw StorageError.corrupt("tree key") }
        // Deeper than a child: below a leaf, nothing.
        guard i == key.count, let c = try InlineObject.decode(v).child(s) else { return nil }
        return Node(c.leaf, priority: c.priority)
    }

    func readNode(_ t: Txn, _ ns: String, _ path: Path) throws -> Node {
        try readNode(t, key: Self.treeKey(ns, path))
    }

    /// Keys of the children of the node at `base`, in key order, one seek per child.
    func childKeys(_ t: Txn, base: [UInt8], from start: [UInt8]? = nil, limit: Int = .max) throws -> [String] {
        var c = try t.cursor(treeS, within: base, keysOnly: true)
        defer { c.close() }
        var out: [String] = []
        var seek = start ?? (base + [0x01])
        while out.count < limit, let k = try c.seekKey(seek), k.starts(with: base), k.count > base.count {
            var i = base.count
            guard let s = KeyCodec.readSegment(k, &i) else { throw StorageError.corrupt("tree key") }
            out.append(s)
            seek = Array(k[0..<i]) + [0xFF]
        }
        // No record below `base`: an inline object keeps its children in its own record.
        if out.isEmpty, limit > 0, let v = try t.get(treeS, base), v.first == InlineObject.tag {
            let from = start ?? []
            for child in try InlineObject.decode(v).children where out.count < limit {
                var k = base
                KeyCodec.appendSegment(child.key, to: &k)
                if !bytesLess(k, from) { out.append(child.key) }
            }
        }
        return out
    }

    func exists(_ t: Txn, key: [UInt8]) throws -> Bool {
        if key.count > SplitTable.inlineBytes, try t.get(treeS, key) != nil { return true }
        if try t.hasPrefix(treeS, key) { return true }
        return try inlineLeaf(t, key: key) != nil
    }

    /// The index value of the node at `key` without reading its subtree.
    func indexValue(_ t: Txn, key: [UInt8]) throws -> IndexValue? {
        if let v = try t.get(treeS, key) {
            if v.first == InlineObject.tag { return .object }
            if case .leaf(let l, _) = try TreeRecord.decode(v) { return IndexValue(node: Node(l)) }
        }
        var c = try t.cursor(treeS, within: key, keysOnly: true)
        defer { c.close() }
        if let k = try c.seekKey(key + [0x01]), k.starts(with: key) { return .object }
        if let leaf = try inlineLeaf(t, key: key)?.leaf { return IndexValue(node: Node(leaf)) }
        return nil
    }

    // MARK: - Versions

    func versionRecord(_ t: Txn, _ key: [UInt8]) throws -> (sub: UInt64, at: UInt64) {
        guard let v = try t.get(verS, key), v.count == 16 else { return (0, 0) }
        var r = ByteReader(v)
        return (try r.u64(), try r.u64())
    }

    func putVersion(_ t: Txn, _ key: [UInt8], sub: UInt64, at: UInt64) throws {
        var w = ByteWriter(capacity: 16)
        w.u64(sub); w.u64(at)
        try t.put(verS, key, w.bytes)
    }

    /// max(sub[P], at[A] for A = root … P): O(depth) point reads, plus one seek for a leaf or
    /// inline object on the path that keeps its own `at` in its tree record
    /// (`TreeRecord.leaf(_:_:version:)`, `InlineObject.version`).
    func version(_ t: Txn, _ ns: String, _ path: Path) throws -> UInt64 {
        try version(t, EncodedPath(ns, path))
    }

    func version(_ t: Txn, _ key: EncodedPath) throws -> UInt64 {
        var best: UInt64 = 0
        for level in 0..<key.ends.count {
            let r = try versionRecord(t, key.ancestor(level))
            best = max(best, r.at)
            if level == key.ends.count - 1 { best = max(best, r.sub) }
        }
        if let (_, v) = try leafOnPath(t, key, includingSelf: true), let own = try TreeRecord.version(v) {
            best = max(best, own)
        }
        return best
    }

    /// The leaf or inline object record on the path to `key` (there is at most one: neither has
    /// descendant records),
    /// strictly above it or also at it, as its key and value. Between a leaf and its would-be
    /// descendant no record sorts, so for keys kept in `tree` it is the record just before (or
    /// at) `key` — one seek; ancestors whose keys overflow are point reads in `treex` (only for
    /// paths longer than `SplitTable.inlineBytes`).
    func leafOnPath(_ t: Txn, _ encoded: EncodedPath, includingSelf: Bool) throws -> ([UInt8], [UInt8])? {
        let key = encoded.bytes
        let c = try t.cursor(tree)
        defer { c.close() }
        if let (k, v) = try includingSelf ? c.seekLastLE(key) : c.seekLastLT(key),
           k.count >= encoded.ends[0], k.count <= key.count, bytesStart(key, with: k), v.first == 1 || v.first == 3 || v.first == InlineObject.tag {
            return (k, v)
        }
        guard key.count > SplitTable.inlineBytes else { return nil }
        let last = includingSelf ? encoded.ends.count - 1 : encoded.ends.count - 2
        guard last >= 1 else { return nil }
        for level in 1...last where encoded.ends[level] > SplitTable.inlineBytes {
            let ak = encoded.ancestor(level)
            if let v = try t.get(treeS, ak), v.first == 1 || v.first == 3 { return (ak, v) }
        }
        return nil
    }

    // MARK: - Meta

    func metaU64(_ t: Txn, _ name: String) throws -> UInt64 {
        guard let v = try t.get(meta, Array(name.utf8)), v.count == 8 else { return 0 }
        var r = ByteReader(v)
        return try r.u64()
    }

    func putMetaU64(_ t: Txn, _ name: String, _ value: UInt64) throws {
        var w = ByteWriter(capacity: 8)
        w.u64(value)
        try t.put(meta, Array(name.utf8), w.bytes)
    }

    /// The meta slot holding the directory's storage format (`BuildInfo.storageFormat`). Absent
    /// in directories of builds before 0.4.0, whose formats (1 and 2) this build opens.
    static let storageFormatMetaKey = "format"

    /// Refuses a directory of a newer storage format, else marks it with this build's format.
    /// Marked before any migration runs: once a record of this format may exist, a build that
    /// checks the mark and cannot read it must refuse the directory rather than misread it.
    func markStorageFormat(_ t: Txn) throws {
        let found = try metaU64(t, Self.storageFormatMetaKey)
        if found > UInt64(BuildInfo.storageFormat) {
            throw StorageError.newerStorageFormat(found: found, newest: BuildInfo.storageFormat)
        }
        if found != UInt64(BuildInfo.storageFormat) {
            try putMetaU64(t, Self.storageFormatMetaKey, UInt64(BuildInfo.storageFormat))
        }
        // Formats before 3 kept text in plain UTF-8 order (a new directory has no rows: its pass
        // is empty); the pass clears the flag when it has run (`TextOrderMigration`).
        if found < 3 { try t.put(meta, TextOrderMigration.pendingMetaKey, [1]) }
        // Formats before 4 keyed index rows by their location key: rebuilt under location ids
        // (`IndexLocations.migrate`; after the text pass, which reads rows of the format before).
        if found < 4 { try t.put(meta, IndexLocations.pendingMetaKey, [1]) }
    }

    static func indexMetaKey(_ ns: String) -> [UInt8] { Array("indexes/".utf8) + Array(ns.utf8) }

    func indexDefs(_ t: Txn, _ ns: String) throws -> [IndexDef] {
        guard let v = try t.get(meta, Self.indexMetaKey(ns)) else { return [] }
        return try IndexDef.decodeList(v)
    }
}

/// One maintained index: a location pattern (nil segments are `$wildcards`) and a child or value index.
struct IndexDef: Hashable {
    var pattern: [String?]
    var patternText: String
    var index: QueryIndex
    var id: [UInt8]

    init(patternText: String, pattern: [String?], index: QueryIndex) {
        self.patternText = patternText
        self.pattern = pattern
        self.index = index
        let canonical = "/" + pattern.map { $0 ?? "$" }.joined(separator: "/") + "\n" + index.wireName
        id = Array(SHA1.digest(Array(canonical.utf8)).prefix(8))
    }

    func matches(_ path: Path) -> Bool {
        path.count == pattern.count && matchesPrefix(path.segments[...])
    }

    /// Whether `segs` (at most as long as the pattern) agrees with the pattern's first segments.
    func matchesPrefix(_ segs: ArraySlice<String>) -> Bool {
        guard segs.count <= pattern.count else { return false }
        for (p, s) in zip(pattern, segs) where p != nil && p != s { return false }
        return true
    }

    static func encodeList(_ defs: [IndexDef]) -> [UInt8] {
        var w = ByteWriter()
        w.varint(defs.count)
        for d in defs { w.string(d.patternText); w.string(d.index.wireName) }
        return w.bytes
    }

    static func decodeList(_ b: [UInt8]) throws -> [IndexDef] {
        var r = ByteReader(b)
        let n = try r.varint()
        var out: [IndexDef] = []
        for _ in 0..<n {
            let p = try r.string()
            let i = try r.string()
            let spec = try IndexSpec(location: p, indexes: [i])
            out.append(contentsOf: spec.defs)
        }
        return out
    }
}

/// An `.indexOn` rule: a location pattern such as `/users/$uid/posts` and the index names defined
/// there (`"height"`, `"dimensions/height"`, `".value"`).
public struct IndexSpec: Sendable, Hashable {
    public var location: String
    public var indexes: [QueryIndex]

    public static let maxIndexesPerNamespace = 256

    public init(location: String, indexes: [String]) throws(StorageError) {
        var pattern: [String?] = []
        for part in location.split(separator: "/", omittingEmptySubsequences: true) {
            let s = String(part)
            if s.hasPrefix("$") {
                guard s.count > 1, Key.isValid(String(s.dropFirst())) else {
                    throw .invalid(.invalidKey(key: s, reason: "bad wildcard"))
                }
                pattern.append(nil)
            } else {
                do { try Key.validate(s) } catch { throw .invalid(error) }
                pattern.append(s)
            }
        }
        guard pattern.count < Limits.maxPathDepth else { throw .invalid(.pathTooDeep(depth: pattern.count)) }
        var idx: [QueryIndex] = []
        for name in indexes {
            switch name {
            case ".value": idx.append(.value)
            case ".key", ".priority": continue  // always available
            default:
                do { idx.append(.child(try Path(name))) } catch { throw .invalid(error) }
                if case .child(let p) = idx.last!, p.isRoot { throw .invalid(.invalidQuery("empty index name")) }
            }
        }
        self.location = "/" + location.split(separator: "/").joined(separator: "/")
        self.indexes = idx
        self.pattern = pattern
    }

    let pattern: [String?]

    var defs: [IndexDef] {
        indexes.map { IndexDef(patternText: location, pattern: pattern, index: $0) }
    }
}
