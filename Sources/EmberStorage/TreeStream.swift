import CLMDB
import EmberCore
import Foundation

/// The JSON of one subtree, written as its records are read from ONE read transaction held until
/// the stream ends (a consistent snapshot, however long the client takes), in Firebase key order
/// (the tree's byte order, `KeyCodec`): `next` returns about `maxBytes` at a time, so memory is
/// bounded by the caller's chunk size plus one record, whatever the subtree's size. The bytes
/// are exactly `Node.toJSON()` / `exportJSON()` serialized (`JSONStreamWriter`): objects whose
/// keys are all array indices become arrays as they do there (decided when the object opens, by
/// a keys-only pass over its children: `isArrayForm`).
///
/// One caller at a time (`next` is synchronous and may be called from different threads in
/// turn: the environment is `MDB_NOTLS`, so a read transaction is not tied to its thread); the
/// lock only guards against the store closing under it (`StreamRegistry`). A stream holds one
/// LMDB reader slot and keeps the pages of its snapshot from reuse until it ends: callers bound
/// how many are open (`StoreOptions.maxTreeStreams`) and close it when their client goes away.
///
/// `@unchecked Sendable`: all mutable state is behind `lock`.
public final class TreeStream: @unchecked Sendable {
    /// The location's version (its ETag) and the snapshot's applied index.
    public let version: UInt64
    public let appliedIndex: UInt64
    /// Whether there is data at the location (`null_etag` when not).
    public let exists: Bool

    private let lock = NSLock()
    private var handle: EnvHandle?
    private var txn: OpaquePointer?
    private var cursor: SplitCursor?
    private var entry: ([UInt8], [UInt8])?
    private let tables: Tables
    private let base: [UInt8]
    private let format: TreeJSONFormat
    private var w: JSONStreamWriter
    private var done = false
    private var wroteRoot = false
    /// Open containers, the location itself first: where each one's key ends in `lastKey`,
    /// whether it is an array (and its next index), and an export's priority not yet written.
    private var levels: [Level] = []
    /// The tree key of the last record written: every open level is an ancestor of it.
    private var lastKey: [UInt8] = []
    /// Priority records (their tree keys) of nodes not yet opened (ancestors of what comes next,
    /// or dropped when no descendant follows: a priority alone is no data).
    private var pendingPriorities: [(key: [UInt8], priority: Priority)] = []
    private weak var registry: StreamRegistry?
    /// A query's children (their encoded key segments, in tree order), walked one subtree after
    /// another; nil for the whole location. `selectedAt` is the child being walked.
    private var selected: [[UInt8]]?
    private var selectedAt = 0
    /// A query's answer is an array when its selected keys are (not the location's keys).
    private var selectionIsArray = false

    private struct Level {
        /// The end of the level's last key segment in `lastKey` (the location: `base.count`).
        /// Segments delimit themselves, so a record is below the level exactly when its key
        /// starts with `lastKey[0..<end]` and is longer.
        var end: Int
        var isArray: Bool
        var nextIndex = 0
        var priority: Priority?
    }

    init(handle: EnvHandle, tables: Tables, namespace: String, path: Path, format: TreeJSONFormat,
         select: ((Txn) throws -> QuerySelection)? = nil, registry: StreamRegistry) throws {
        self.tables = tables
        let base = Tables.treeKey(namespace, path)
        self.base = base
        self.format = format
        self.w = JSONStreamWriter(pretty: format.pretty)
        var t: OpaquePointer?
        try check(mdb_txn_begin(handle.env, nil, flag(MDB_RDONLY), &t))
        let txn = Txn(ptr: t!)
        do {
            exists = try tables.exists(txn, key: base)
            version = try tables.version(txn, namespace, path)
            appliedIndex = try tables.metaU64(txn, "applied")
        } catch {
            mdb_txn_abort(t)
            throw error
        }
        self.handle = handle
        self.txn = t
        self.registry = registry
        do {
            if let select { try startSelection(txn, try select(txn)) } else { try start(txn) }
        } catch {
            release()
            throw error
        }
        if !done { registry.add(self) }
    }

    deinit { release() }

    /// True once every byte was returned by `next`.
    public var isFinished: Bool { lock.withLock { done && w.out.isEmpty } }

    /// The next bytes of the document: at least `maxBytes` unless it ends first (then the rest,
    /// and `isFinished`), at most `maxBytes` plus one record's JSON.
    public func next(maxBytes: Int) throws -> [UInt8] {
        precondition(maxBytes > 0, "a chunk needs room")
        return try lock.withLock {
            if !done {
                guard let t = txn else { throw StorageError.closed }
                let txn = Txn(ptr: t)
                while w.out.count < maxBytes, let (k, v) = entry {
                    let jump = try visit(txn, k, v)
                    let e = try jump.map { try cursor!.seek($0) } ?? cursor!.next()
                    if let sel = selected {
                        // Within the child being walked, else on to the next selected child.
                        if let e, bytesStart(e.0, with: base + sel[selectedAt]) { entry = e } else {
                            selectedAt += 1
                            entry = try seekSelected()
                        }
                    } else {
                        entry = e.flatMap { bytesStart($0.0, with: base) ? $0 : nil }
                    }
                }
                if entry == nil { finish() }
            }
            return w.take()
        }
    }

    /// Ends the stream early (the client went away) and lets the snapshot go.
    public func close() { lock.withLock { release() } }

    /// The store closes: no LMDB call may follow.
    func closeForShutdown() { lock.withLock { release() } }

    // MARK: - Walk

    private func start(_ t: Txn) throws {
        // The location is a leaf or a small inline object: its one record is the answer.
        if let v = try t.get(tables.treeS, base) {
            switch try TreeRecord.decode(v) {
            case .leaf(let l, let p): return whole(Node(l, priority: p))
            case .inline(let o): return whole(o.node)
            case .priority(let p): if format.export && !format.shallow { pendingPriorities = [(base, p)] }
            }
        }
        cursor = try t.cursor(tables.treeS, within: base)
        entry = try cursor!.seek(base).flatMap { bytesStart($0.0, with: base) ? $0 : nil }
        if let (k, _) = entry, k.count == base.count {  // the location's own priority record
            entry = try cursor!.next().flatMap { bytesStart($0.0, with: base) ? $0 : nil }
        }
        // Nothing at or below the location: it may be a child of an inline object.
        if entry == nil { whole(try tables.inlineLeaf(t, key: base) ?? .empty) }
    }

    /// A query's answer: the selected children's subtrees in key order (or its window, when the
    /// store read the location whole to compute it).
    private func startSelection(_ t: Txn, _ selection: QuerySelection) throws {
        switch selection {
        case .whole(let window):
            var kids: KeyMap<Node> = [:]
            for (k, n) in window { kids[k] = n }
            return whole(Node(children: kids))
        case .keys(let keys):
            if keys.isEmpty { return whole(.empty) }
            // The location is a small inline object: its children have no records of their own.
            if let v = try t.get(tables.treeS, base), v.first == InlineObject.tag {
                var kids: KeyMap<Node> = [:]
                for k in keys { kids[k] = try tables.readNode(t, key: base + KeyCodec.segment(k)) }
                return whole(Node(children: kids))
            }
            let indices = keys.compactMap(Node.arrayIndex)
            selectionIsArray = !format.export && indices.count == keys.count && indices.max()! < 2 * keys.count
            selected = keys.map(KeyCodec.segment).sorted { $0.lexicographicallyPrecedes($1) }
            cursor = try t.cursor(tables.treeS, within: base)
            entry = try seekSelected()
            if entry == nil { whole(.empty) }
        }
    }

    /// The first record of the selected child at `selectedAt` or after it (every selected key
    /// has records in this snapshot: the query read it here).
    private func seekSelected() throws -> ([UInt8], [UInt8])? {
        while let sel = selected, selectedAt < sel.count {
            let prefix = base + sel[selectedAt]
            if let e = try cursor!.seek(prefix), bytesStart(e.0, with: prefix) { return e }
            selectedAt += 1
        }
        return nil
    }

    /// The whole answer from one node already in memory (a leaf or an inline object: small).
    private func whole(_ node: Node) {
        if format.shallow && node.hasChildren {
            w.beginObject()
            for k in node.children.keys.sorted(by: KeyOrder.less) {
                w.key(k)
                w.value(.bool(true))
            }
            w.end()
        } else {
            w.value(format.export && !format.shallow ? node.exportJSON() : node.toJSON())
        }
        wroteRoot = true
        finish()
    }

    /// Writes what the record `k`, `v` adds; returns where to seek next when it is not the
    /// following record (a shallow read skips each child's subtree). Keys and values go from
    /// their stored bytes to JSON (`RecordJSON`); only what that cannot write is decoded.
    private func visit(_ t: Txn, _ k: [UInt8], _ v: [UInt8]) throws -> [UInt8]? {
        if format.shallow {
            if levels.isEmpty { try openLevel(t, k, key: nil) }
            guard let end = KeyCodec.segmentEnd(k, at: base.count) else { throw StorageError.corrupt("tree key") }
            try member(k, base.count..<end)
            w.value(.bool(true))
            // Past the child's subtree (as `Tables.childKeys` steps): the next child's first record.
            return Array(k[0..<end]) + [0xFF]
        }
        if v.first == 2 {  // an interior node's priority
            guard case .priority(let p) = try TreeRecord.decode(v) else { throw StorageError.corrupt("priority record") }
            if format.export {
                pendingPriorities.removeAll { !bytesStart(k, with: $0.key) }
                pendingPriorities.append((k, p))
            }
            return nil
        }
        let own = try enter(t, k)
        try member(k, own)
        if try !RecordJSON.writeValue(v, export: format.export, into: &w) {
            switch try TreeRecord.decode(v) {
            case .leaf(let l, let p):
                if format.export, let p { w.value(.object([".value": l.json, ".priority": p.json])) } else { w.value(l.json) }
            case .inline(let o):
                w.value(format.export ? o.node.exportJSON() : o.node.toJSON())
            case .priority: break
            }
        }
        pendingPriorities.removeAll()
        return nil
    }

    /// Opens the containers on the way to the record at `k` (its ancestors below the location),
    /// closing those of the records before that are not on it; returns where the record's own
    /// key segment is in `k`.
    private func enter(_ t: Txn, _ k: [UInt8]) throws -> Range<Int> {
        var common = 0
        let n = min(k.count, lastKey.count)
        while common < n && k[common] == lastKey[common] { common += 1 }
        var shared = levels.isEmpty ? 0 : 1
        while shared < levels.count, levels[shared].end <= common, levels[shared].end < k.count { shared += 1 }
        while levels.count > shared { closeLevel() }
        lastKey = k
        if levels.isEmpty { try openLevel(t, k, key: nil) }
        var i = levels[levels.count - 1].end
        while true {
            guard let end = KeyCodec.segmentEnd(k, at: i) else { throw StorageError.corrupt("tree key") }
            if end == k.count { return i..<end }
            try openLevel(t, k, key: i..<end)
            i = end
        }
    }

    /// Opens the level whose last key segment is `key` in `k` (nil: the location itself).
    private func openLevel(_ t: Txn, _ k: [UInt8], key: Range<Int>?) throws {
        let end = key?.upperBound ?? base.count
        let priority = format.export ? pendingPriorities.first { $0.key.count == end && bytesStart(k, with: $0.key) }?.priority : nil
        let isArray: Bool
        if format.shallow || format.export {
            isArray = false
        } else if key == nil && selected != nil {
            isArray = selectionIsArray
        } else {
            // Its first child's key (the next segment of `k`) decides whether to look further.
            guard let first = KeyCodec.segmentEnd(k, at: end) else { throw StorageError.corrupt("tree key") }
            isArray = try RecordJSON.isArrayIndexSegment(k, end..<first) && isArrayForm(t, Array(k[0..<end]))
        }
        if let key { try member(k, key) }
        if isArray { w.beginArray() } else { w.beginObject() }
        levels.append(Level(end: end, isArray: isArray, priority: priority))
        wroteRoot = true
    }

    /// Places the next member of the innermost level, whose key is the segment `seg` of `k`: its
    /// key, or in an array the nulls of the indices it skips (`Node.toJSON`'s array form fills
    /// holes with null).
    private func member(_ k: [UInt8], _ seg: Range<Int>) throws {
        let i = levels.count - 1
        if levels[i].isArray {
            var at = seg.lowerBound
            guard let s = KeyCodec.readSegment(k, &at), let index = Node.arrayIndex(s) else {
                throw StorageError.corrupt("array member key")
            }
            while levels[i].nextIndex < index {
                w.value(.null)
                levels[i].nextIndex += 1
            }
            levels[i].nextIndex = index + 1
            return
        }
        if let p = levels[i].priority, RecordJSON.prioritySegment.lexicographicallyPrecedes(k[seg]) {
            w.key(".priority")
            w.value(p.json)
            levels[i].priority = nil
        }
        try RecordJSON.writeKey(k, segment: seg, into: &w)
    }

    private func closeLevel() {
        let top = levels.removeLast()
        if let p = top.priority {
            w.key(".priority")
            w.value(p.json)
        }
        w.end()
    }

    /// `Node.toJSON`'s array form: every child key an array index and the greatest below twice
    /// the count. Keys only, one seek per child (the subtrees are not read); stops at the first
    /// key that is not an index.
    private func isArrayForm(_ t: Txn, _ key: [UInt8]) throws -> Bool {
        var c = try t.cursor(tables.treeS, within: key, keysOnly: true)
        defer { c.close() }
        var count = 0, greatest = -1
        var seek = key + [0x01]
        while let k = try c.seekKey(seek), bytesStart(k, with: key), k.count > key.count {
            var i = key.count
            guard let s = KeyCodec.readSegment(k, &i) else { throw StorageError.corrupt("tree key") }
            guard let n = Node.arrayIndex(s) else { return false }
            count += 1
            greatest = n
            seek = Array(k[0..<i]) + [0xFF]
        }
        return greatest < 2 * count
    }

    private func finish() {
        guard !done else { return }
        while !levels.isEmpty { closeLevel() }
        if !wroteRoot { w.value(.null) }
        done = true
        release()
    }

    /// Ends the transaction (once) and lets go of the environment.
    private func release() {
        cursor?.close()
        cursor = nil
        entry = nil
        if let t = txn { mdb_txn_abort(t) }
        txn = nil
        handle = nil
        registry?.remove(self)
    }
}

/// Streams open on a store, so that closing the store ends their transactions first (a read
/// transaction must not outlive its environment).
final class StreamRegistry: @unchecked Sendable {
    private let lock = NSLock()
    private var open: [ObjectIdentifier: Weak] = [:]
    private struct Weak { weak var stream: TreeStream? }

    var count: Int { lock.withLock { open.count } }

    /// Admits one more stream unless `limit` are open.
    func admit(limit: Int) -> Bool { lock.withLock { open.count < limit } }

    func add(_ s: TreeStream) { lock.withLock { open[ObjectIdentifier(s)] = Weak(stream: s) } }
    func remove(_ s: TreeStream) { _ = lock.withLock { open.removeValue(forKey: ObjectIdentifier(s)) } }

    func closeAll() {
        let streams = lock.withLock { open.values.compactMap(\.stream) }
        for s in streams { s.closeForShutdown() }
    }
}
