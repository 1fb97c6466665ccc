import EmberCore
import Foundation

/// Applies log entries inside a write transaction. Lives on the writer thread only.
struct Applier {
    let tables: Tables
    let t: Txn
    /// Index definitions by namespace, loaded lazily for this transaction.
    var defsCache: [String: [IndexDef]] { didSet { recentDefs = nil } }
    /// The last namespace `defs` answered for (every write asks at least twice): no hashing.
    private var recentDefs: (ns: String, defs: [IndexDef])?
    /// The rules writes are judged by (a `.setRules` entry changes them for the entries after it).
    var rules: RulesState
    /// Trigger definitions by namespace (a trigger `.define` entry changes them for the entries after it).
    var triggers: [String: TriggerSet]
    /// Ancestors' raised `sub` versions, written once per transaction (flat mode); nil: each
    /// write puts its ancestors' records itself.
    let pending: PendingVersions?
    /// Where the trigger groups' record streams end in this flat transaction (`TriggerTails`);
    /// nil: each matching write reads it from the store.
    let tails: TriggerTails?
    /// Set while a bulk write (`bulkParts` or more parts or children) applies: its index rows
    /// wait here and go in key order at its end (`OrderedRows`), and its tree records go in
    /// key order, with MDB_APPEND where they land past the table's end: a load into an empty
    /// location writes full pages instead of pages split in half.
    var rows: OrderedRows?
    static let bulkParts = 64
    /// Set by the restore-only replay (`Writer.replay`): its results are dropped (no change
    /// sets, no versions looked up for them), and an update's parts read what they replace
    /// with one cursor positioning each (`WriteProbe`). The state written is the same
    /// (`ArchiveReplayTests`).
    var replaying = false
    /// The replay's cursors kept open for its transaction (`ReplayCursors`): set with
    /// `replaying` by `Writer.withFlatApplier`, which closes them.
    var replayCursors: ReplayCursors?
    /// Every entry this Applier applies stays in the store's log until its compaction expands
    /// the compact trigger records that name it (`TriggerChangeLog.expandCompacted`): a
    /// group's record may be stored compact (`TriggerCompactRecord`). Set by the writer for a
    /// cluster member's logged applies only (a single node and a learner keep no log rows).
    var compactTriggers = false
    /// Groups whose records go full even with `compactTriggers`: the last compaction had to keep
    /// their records (`Writer.triggerGroupsBehind`), so a compact one would be expanded later.
    var fullTriggerGroups: Set<TriggerTails.Key> = []

    init(tables: Tables, txn: Txn, defsCache: [String: [IndexDef]] = [:], rules: RulesState = RulesState(),
         pending: PendingVersions? = nil, triggers: [String: TriggerSet] = [:], tails: TriggerTails? = nil) {
        self.tables = tables
        self.tails = tails
        self.triggers = triggers
        self.t = txn
        self.defsCache = defsCache
        self.rules = rules
        self.pending = pending
    }

    mutating func defs(_ ns: String) throws -> [IndexDef] {
        if let r = recentDefs, r.ns == ns { return r.defs }
        let d: [IndexDef]
        if let cached = defsCache[ns] { d = cached } else {
            d = try tables.indexDefs(t, ns)
            defsCache[ns] = d
        }
        recentDefs = (ns, d)
        return d
    }

    /// Applies one entry. Throws only for storage failures and apply-time validation errors
    /// (the caller runs this in a nested transaction and records `.rejected`).
    /// `prebuilt`: the entry's nodes as `EmberStore.prepare` built them (writes without server
    /// values), so they are not converted from JSON again. `keys`: the tree keys of a set's path
    /// or an update's parts, in the operation's order, encoded off the writer thread (the
    /// restore's replay: `EmberStore.replayPrepared`), or nil (encoded here).
    mutating func apply(_ e: LogEntry, prebuilt: [Node]? = nil, keys: [EncodedPath]? = nil) throws -> WriteResult {
        guard let stamp = e.writer else { return try applyOperation(e, prebuilt: prebuilt, keys: keys) }
        return try applyStamped(e, stamp, prebuilt: prebuilt, keys: keys)
    }

    /// Applies the entry's operation (no writer stamp involved).
    mutating func applyOperation(_ e: LogEntry, prebuilt: [Node]? = nil, keys preKeys: [EncodedPath]? = nil) throws -> WriteResult {
        let ns = e.namespace
        let base = e.operation.path
        var result = WriteResult(index: e.index, term: e.term, namespace: ns, path: base, outcome: .noop,
                                 value: .empty, version: 0, changeSet: ChangeSet(namespace: ns, changes: []))
        switch e.operation {
        case .noop:
            return result
        case .archived(let through):
            try ArchiveMark.record(tables, t, through: through)
            return result
        case .setRules(let text):
            try applyRules(e, text: text)
            result.rulesChanged = true
            return result
        case .onDisconnect(let op):
            try applyOnDisconnect(e, op, into: &result)
            return result
        case .triggers(let op):
            try applyTriggers(e, op)
            if case .advance = op { result.triggerReach = .cursors }
            return result
        case .set(let path, let json, let cond):
            switch try applySet(e, path: path, json: json, condition: cond, key: preKeys?[0], prebuilt: prebuilt) {
            case .denied:
                result.triggerReach = .none
                result.outcome = .denied
            case .conditionFailed(let old, let failed):
                result.triggerReach = .none
                result.outcome = .conditionFailed(current: old, version: failed)
                result.value = old
                result.version = failed
            case .applied(let changed, let node, let reach):
                result.triggerReach = reach
                result.outcome = .applied(changed: changed)
                if replaying { return result }
                result.value = node
                if changed { result.changesFollowValue() }
                // The write put at[path] = this index, the largest there is.
                result.version = changed ? e.index : try version(ns, path)
            }
            return result
        case .update(let path, let parts, let cond):
            try applyUpdate(e, path: path, rels: parts.map(\.0), text: nil, cond: cond, prebuilt: prebuilt, keys: preKeys, into: &result) { i, old, abs in
                try Self.resolve(parts[i].1, existing: old, depth: abs.count, now: e.timestamp)
            }
        case .updateText(let path, let text, let cond):
            try applyUpdate(e, path: path, rels: text.parts.map(\.path), text: prebuilt == nil ? text : nil, cond: cond,
                            prebuilt: prebuilt, keys: preKeys, into: &result) { i, _, abs in
                // Checked before it was logged: only damaged bytes fail here, alike on every replica.
                do throws(EmberError) { return try text.node(i, depth: abs.count) } catch { throw StorageError.invalid(error) }
            }
        }
        return result
    }

    /// A multi-path update's apply (`update`, `updateText`): `build(i, old, abs)` is part `i`'s
    /// new node when none was built before (`prebuilt`). `text`: the parts' text when no node
    /// was built (`updateText`): parts over nothing may be written from it (`writeText`).
    private mutating func applyUpdate(_ e: LogEntry, path: Path, rels parts: [Path], text: UpdateText?, cond: WriteCondition?,
                                      prebuilt: [Node]?, keys preKeys: [EncodedPath]?, into result: inout WriteResult,
                                      node build: (Int, Node, Path) throws -> Node) throws {
        let ns = e.namespace
        result.triggerReach = .none
        // Resolve every part against the state before the update, then write them in order.
        // Each part: its path, new node, old node and whether the old one is a leaf record.
        var resolved: [(Path, Node, Node, Bool)] = []
        var keys: [EncodedPath] = []
        // Parts read from their text into `tree` (`TextTree`), no node built: their root items
        // (-1: empty); `notRead` the others'.
        var tree = TextTree()
        let notRead: Int32 = -2
        var roots: [Int32] = []
        let fromText = try text.map { try textWritable(e, base: path, parts: $0.parts.map(\.path)) } ?? false
        for (i, rel) in parts.enumerated() {
            let abs = path.appending(rel)
            keys.append(preKeys?[i] ?? EncodedPath(ns, abs))
            assert(keys[i].bytes == EncodedPath(ns, abs).bytes, "a prebuilt key is the part's path's")
            // Every part is read before any is written: the probe's old value holds (what
            // it found above the key may not, once an earlier part has written).
            let parent = abs.isRoot ? nil : try replayCursors?.parent(of: keys[i])
            let probe = replaying ? try tables.probeWrite(t, keys[i], using: parent?.cursor) : nil
            if parent == nil { probe?.cursor.close() }
            let (old, leafRecord) = try probe.map { ($0.node, $0.leafRecord) } ?? tables.readNodeRecord(t, key: keys[i].bytes)
            // What the text walk does not take (a repeated key, a refused value) builds the
            // node: it takes it after all or throws its error.
            if fromText, old.isEmpty, let text, let root = try? tree.read(text.bytes, range: text.parts[i].range, depth: abs.count,
                                                                           jsonDepth: UpdateText.nesting) {
                roots.append(root ?? -1)
                resolved.append((abs, .empty, old, leafRecord))
                continue
            }
            roots.append(notRead)
            let node = try prebuilt?[i] ?? build(i, old, abs)
            resolved.append((abs, node, old, leafRecord))
        }
        let anyFromText = roots.contains { $0 != notRead }
        // All or nothing: one denied part denies the whole update.
        guard try permits(e, base: path, parts: resolved.map { ($0.0, $0.1) }, isUpdate: true) else {
            result.outcome = .denied
            return
        }
        if let cond {
            let old = try tables.readNode(t, ns, path)
            if let failed = try checkCondition(cond, ns: ns, path: path, current: old) {
                result.outcome = .conditionFailed(current: old, version: failed)
                result.value = old
                result.version = failed
                return
            }
        }
        var anyChange = false
        // No part is at or below another (`EmberStore.checkOperation` refuses such updates
        // before they are logged), so no part's write changes what another part read, and
        // the parts may be written in any order: a bulk update writes them in key order.
        assert(EmberStore.nestedPair(resolved.map(\.0)) == nil, "an update's parts do not nest")
        let bulk = resolved.count >= Self.bulkParts
        let order = bulk ? keys.indices.sorted { bytesLess(keys[$0].bytes, keys[$1].bytes) } : Array(keys.indices)
        if bulk { rows = OrderedRows() }
        defer { rows = nil }
        let capture = try captureTriggers(ns, parts: resolved.map { ($0.0, $0.2) })
        assert(capture == nil || !anyFromText, "a namespace with triggers reads no part from its text")
        var changed = [Bool](repeating: false, count: resolved.count)
        for i in order {
            let (abs, node, old, leafRecord) = resolved[i]
            if roots[i] != notRead {
                changed[i] = try writeText(path: abs, key: keys[i], tree: tree, root: roots[i] < 0 ? nil : roots[i], index: e.index)
                continue
            }
            changed[i] = try write(ns: ns, path: abs, key: keys[i], node: node, old: old, oldLeafRecord: leafRecord, index: e.index)
        }
        try flushRows()
        if let capture, changed.contains(true) {
            result.triggerReach = try recordTriggers(e, capture, parts: resolved.map { ($0.0, $0.1) })
        }
        if replaying {
            result.outcome = .applied(changed: changed.contains(true))
            return
        }
        if anyFromText, let text {
            // The nodes nobody built: built from the text if the answer or the changes are read.
            result.buildLater(from: TextPatch(text: text, base: path, changed: changed))
            anyChange = changed.contains(true)
            result.outcome = .applied(changed: anyChange)
            result.version = anyChange ? e.index : try version(ns, path)
            return
        }
        for (i, (abs, node, _, _)) in resolved.enumerated() where changed[i] {
            anyChange = true
            result.changeSet.changes.append((abs, node))
        }
        if bulk {
            // In key order (`order`: path order), the patch is assembled level by level.
            result.value = Node.assembling(order.map { (parts[$0], resolved[$0].1) })
        } else {
            var patch = Node.empty
            for (i, rel) in parts.enumerated() { patch.set(resolved[i].1, at: rel) }
            result.value = patch
        }
        result.outcome = .applied(changed: anyChange)
        // Every part lies at or below `path`, so a change raised sub[path] to this index.
        result.version = anyChange ? e.index : try version(ns, path)
    }

    /// `Tables.version` seen through this transaction's pending ancestor versions.
    func version(_ ns: String, _ path: Path) throws -> UInt64 {
        let key = EncodedPath(ns, path)
        let stored = try tables.version(t, key)
        guard let pending, !pending.isEmpty else { return stored }
        return max(stored, pending.sub(of: key.bytes) ?? 0)
    }

    /// nil when the condition holds; otherwise the current version.
    func checkCondition(_ c: WriteCondition, ns: String, path: Path, current: Node) throws -> UInt64? {
        let v = try version(ns, path)
        switch c {
        case .ifVersion(let want): return want == v ? nil : v
        case .ifHash(let h): return current.firebaseHash == h ? nil : v
        case .ifDataVersion(let want):
            return (current.isEmpty ? nil : v) == want ? nil : v
        }
    }

    static func resolve(_ json: JSON, existing: Node, depth: Int, now: Int64) throws -> Node {
        do {
            let j = ServerValues.containsPlaceholder(json) ? try ServerValues.resolve(json, existing: existing, now: now) : json
            return try Node(json: j, depth: depth)
        } catch {
            throw StorageError.invalid(error)
        }
    }

    /// Replaces the subtree at `path` with `node`; returns whether anything changed.
    /// `oldLeafRecord`: `old` is a leaf read from its own record at `key` (`readNodeRecord`).
    /// `probed`: `old` as `Tables.probeWrite` found it, with the tree unchanged since.
    /// `parent`: the replay's entry for the path's parent (`ReplayCursors`), or nil.
    /// `leafRecord`: `node`'s leaf record with version `index`, built off the writer thread
    /// (`ReplayPrepared.leafRecord`), or nil.
    mutating func write(ns: String, path: Path, key encoded: EncodedPath, node: Node, old: Node,
                        oldLeafRecord: Bool = false, index: UInt64, probed: WriteProbe? = nil,
                        parent: ReplayCursors.Parent? = nil, leafRecord prebuiltRecord: [UInt8]? = nil) throws -> Bool {
        let key = encoded.bytes
        // A leaf ancestor (at most one) is turned into an object that keeps its priority.
        // Data at `path` means its ancestors have a child: none of them is a leaf.
        let leafAncestor = !node.isEmpty && !path.isRoot && old.isEmpty ? try leafAncestor(of: encoded, probed: probed) : nil
        // Exact equality: an int and an equal double differ (stored differently).
        if leafAncestor == nil && node.isIdentical(to: old) { return false }
        // Before the tree changes: the index entries of children this write lies below.
        let below = try entriesBelow(ns: ns, path: path, old: old)
        // A small object written at its own path is one record (`InlineObject`).
        let inline = tables.inlineObjects && !path.isRoot && node.leaf == nil
            ? InlineObject.record(for: node, key: key, version: index) : nil
        // A leaf or inline object written at its own path keeps its version in its tree record
        // (not the root's: the root's version row is read by every version lookup anyway).
        let ownVersion = (node.leaf != nil && !path.isRoot) || inline != nil

        // `old` was read in this transaction: nothing at or below `key` when it is empty, only
        // `key` itself when it is a leaf (spares long keys a scan of their overflow group).
        // A leaf's record replaced by another record at its key (a leaf or a small object): the
        // put below overwrites it, one B-tree operation instead of a delete and an insert.
        let replacedInPlace = oldLeafRecord && (inline != nil || (ownVersion && node.leaf != nil))
        if old.isEmpty || replacedInPlace {
        } else if old.leaf != nil {
            // No record at `key`: the leaf is a child of an inline object, stored per leaf first.
            if try !t.delete(tables.treeS, key) {
                guard let (k, record) = try tables.inlineAbove(t, key: key) else {
                    throw StorageError.corrupt("a leaf read without its record")
                }
                try explode(k, record)
                try t.delete(tables.treeS, key)
            }
        } else {
            try t.deletePrefix(tables.treeS, key)
        }
        // Nothing written to the tree since the probe (no deletes above, no ancestor changed):
        // the record's put goes through its cursor.
        let positioned = (old.isEmpty || replacedInPlace) && leafAncestor == nil && rows == nil ? probed?.cursor : nil
        if let leafAncestor { try becomeObject(leafAncestor, index: index) }
        if node.isEmpty {
            // Prune ancestors left without children (their priority records go too).
            for level in stride(from: path.count - 1, through: 0, by: -1) {
                let pk = encoded.ancestor(level)
                if try t.hasPrefix(tables.treeS, pk + [0x01]) || t.hasPrefix(tables.treeS, pk + [0x02]) { break }
                try t.delete(tables.treeS, pk)
            }
        } else if ownVersion, let leaf = node.leaf {
            let record = prebuiltRecord ?? TreeRecord.leaf(leaf, node.priority, version: index)
            assert(record == TreeRecord.leaf(leaf, node.priority, version: index), "a prebuilt leaf record is the node's")
            if let positioned { try positioned.put(key, record, append: probed!.pastEnd) } else if rows != nil { try t.putOrdered(tables.treeS, key, record) } else { try t.put(tables.treeS, key, record) }
        } else if let inline {
            if let positioned { try positioned.put(key, inline, append: probed!.pastEnd) } else if rows != nil { try t.putOrdered(tables.treeS, key, inline) } else { try t.put(tables.treeS, key, inline) }
        } else {
            var k = key
            try putRecords(node, key: &k, version: index)
        }

        try writeVersions(path: path, key: encoded, ownVersion: ownVersion, index: index, parent: parent)
        try maintainIndexes(ns: ns, path: path, node: node, below: below)
        return true
    }

    /// Replaces the inline object record at `key` by the per-leaf records and the version row
    /// it stands for (before a write inside or below it), so every path keeps its version.
    func explode(_ key: [UInt8], _ record: [UInt8]) throws {
        let o = try InlineObject.decode(record)
        if o.priority == nil { try t.delete(tables.treeS, key) }
        for (k, v) in o.records(at: key) { try t.put(tables.treeS, k, v) }
        try t.put(tables.verS, key, o.versionRow)
    }

    // MARK: - Indexes

    /// One index row: `location id + index value + child segment` → nothing, or for a string
    /// cut in the key the child segment's offset (u16) + the exact value (`IndexRowValue`).
    struct IndexRow: Equatable {
        var key: [UInt8]
        var value: [UInt8]
    }

    /// The index entry of one child of an index location, as it was before a write below it.
    struct ChildEntry {
        let def: IndexDef
        let location: Path
        let childKey: String
        /// The location's key and its id (nil: the location has no rows yet).
        let locKey: [UInt8]
        let id: [UInt8]?
        let before: IndexRow?
    }

    /// For each definition whose location lies strictly above `path`: the child on the path and
    /// its index row now, before the write changes the tree. There is no reverse table: the
    /// stale row's key is derived from the child's old value, so it must be read before the
    /// write, in the same transaction (earlier parts of an update and earlier entries of the
    /// batch are already in the tree). A write at the child itself has that value: `old`, read
    /// in this transaction before the write (no other part of its update lies at, above or
    /// below it); deeper writes read the child's indexed value from the tree.
    mutating func entriesBelow(ns: String, path: Path, old: Node) throws -> [ChildEntry] {
        let defs = try defs(ns)
        if defs.isEmpty { return [] }
        var out: [ChildEntry] = []
        for d in defs where path.count > d.pattern.count && d.matchesPrefix(path.segments.prefix(d.pattern.count)) {
            let loc = Path(validated: Array(path.segments.prefix(d.pattern.count)))
            let childKey = path.segments[d.pattern.count]
            let locKey = IndexLocations.key(ns: ns, def: d, location: loc)
            // A location without an id has no rows: the child had none either.
            let id = try tables.locationId(t, locKey)
            var before: IndexRow?
            if let id {
                let value = path.count == d.pattern.count + 1
                    ? Self.value(def: d, child: old)
                    : try entryValue(ns: ns, def: d, location: loc, childKey: childKey)
                before = value.map { Self.indexRow(prefix: id, childKey: childKey, value: $0) }
            }
            out.append(ChildEntry(def: d, location: loc, childKey: childKey, locKey: locKey, id: id, before: before))
        }
        return out
    }

    /// The index value of a child whose whole value is `child` (nil when it is empty: no child).
    static func value(def d: IndexDef, child: Node) -> IndexValue? {
        child.isEmpty ? nil : d.index.indexValue(of: child)
    }

    /// After a write at `path` (of `node`): the rows of the children it lies below are replaced
    /// when they changed; the rows of every location at or below `path` are re-derived from `node`.
    mutating func maintainIndexes(ns: String, path: Path, node: Node, below: [ChildEntry]) throws {
        for e in below {
            // A write at the child replaced it with `node`; below it, re-read (a few point
            // reads): even a write beside the indexed child path can create or remove the child.
            let value = path.count == e.location.count + 1
                ? Self.value(def: e.def, child: node)
                : try entryValue(ns: ns, def: e.def, location: e.location, childKey: e.childKey)
            if value == nil && e.before == nil { continue }
            let id = try e.id ?? tables.allocateLocationId(t, e.locKey)
            let after = value.map { Self.indexRow(prefix: id, childKey: e.childKey, value: $0) }
            if after == e.before { continue }
            if let rows {
                if let old = e.before { rows.delete(old.key) }
                if let new = after { rows.put(new.key, new.value) } else { rows.emptied.append((e.locKey, id)) }
                continue
            }
            if let old = e.before { try t.delete(tables.idxS, old.key) }
            if let new = after { try t.put(tables.idxS, new.key, new.value) } else { try tables.sweep(t, e.locKey, id: id) }
        }
        let defs = try defs(ns)
        if defs.isEmpty { return }
        for d in defs where path.count <= d.pattern.count && d.matchesPrefix(path.segments[...]) {
            // The table is changed directly here: rows waiting go first.
            try flushRows()
            try tables.dropLocations(t, under: IndexLocations.prefix(ns: ns, def: d, under: path))
            try addEntries(ns: ns, def: d, at: path, node: node)
        }
    }

    /// Writes the index rows a bulk write kept (`rows`), then forgets the ids of locations its
    /// deletes left without rows.
    func flushRows() throws {
        guard let rows else { return }
        try rows.flush(t, tables.idxS)
        for (locKey, id) in rows.emptied { try tables.sweep(t, locKey, id: id) }
        rows.emptied = []
    }

    /// Adds the entries of every location under `path` (inside `node`, the value at `path`).
    func addEntries(ns: String, def d: IndexDef, at path: Path, node: Node) throws {
        if node.isEmpty { return }
        if path.count == d.pattern.count {
            if node.children.isEmpty { return }  // a leaf has no children to index
            // A fresh id (the location's rows were just dropped): its rows sort past the table's end.
            let id = try tables.allocateLocationId(t, IndexLocations.key(ns: ns, def: d, location: path))
            var rows = node.children.map { k, child in
                Self.indexRow(prefix: id, childKey: k, value: d.index.indexValue(of: child))
            }
            // Many rows: in key order, past the table's end with MDB_APPEND (full pages).
            let bulk = rows.count >= Self.bulkParts
            if bulk { rows.sort { bytesLess($0.key, $1.key) } }
            for row in rows {
                if bulk { try t.putOrdered(tables.idxS, row.key, row.value) } else { try t.put(tables.idxS, row.key, row.value) }
            }
            return
        }
        if let lit = d.pattern[path.count] {
            try addEntries(ns: ns, def: d, at: path.child(lit), node: node.child(lit))
        } else {
            for (k, child) in node.children { try addEntries(ns: ns, def: d, at: path.child(k), node: child) }
        }
    }

    /// Builds a new index from the stored tree: each location's rows in key order, under a fresh
    /// id (past the table's end: full pages).
    func build(ns: String, def d: IndexDef) throws {
        try drop(ns: ns, def: d)
        func walk(_ path: Path) throws {
            let key = Tables.treeKey(ns, path)
            if path.count == d.pattern.count {
                var rows: [(String, IndexValue)] = []
                for k in try tables.childKeys(t, base: key) {
                    if let value = try entryValue(ns: ns, def: d, location: path, childKey: k) { rows.append((k, value)) }
                }
                if rows.isEmpty { return }
                let id = try tables.allocateLocationId(t, IndexLocations.key(ns: ns, def: d, location: path))
                for row in rows.map({ Self.indexRow(prefix: id, childKey: $0.0, value: $0.1) }).sorted(by: { bytesLess($0.key, $1.key) }) {
                    try t.putOrdered(tables.idxS, row.key, row.value)
                }
                return
            }
            if let lit = d.pattern[path.count] {
                try walk(path.child(lit))
            } else {
                for k in try tables.childKeys(t, base: key) { try walk(path.child(k)) }
            }
        }
        try walk(.root)
    }

    func drop(ns: String, def d: IndexDef) throws {
        try tables.dropLocations(t, under: KeyCodec.namespacePrefix(ns) + d.id)
    }

    /// The index value of one child as the stored tree holds it now; nil when there is no such child.
    func entryValue(ns: String, def d: IndexDef, location: Path, childKey: String) throws -> IndexValue? {
        let childTreeKey = Tables.treeKey(ns, location.child(childKey))
        guard try tables.exists(t, key: childTreeKey) else { return nil }
        switch d.index {
        case .child(let p):
            return try tables.indexValue(t, key: childTreeKey + KeyCodec.encode(p)) ?? .null
        default:
            return try tables.indexValue(t, key: childTreeKey) ?? .null
        }
    }

    /// The row of one child under `prefix`: a location id (as stored) or a location key (the
    /// logical row, as format 3 stored it and snapshots carry it).
    static func indexRow(prefix: [UInt8], childKey: String, value: IndexValue) -> IndexRow {
        var key = prefix
        let truncated = KeyCodec.appendIndexValue(value, to: &key)
        let offset = key.count
        KeyCodec.appendSegment(childKey, to: &key)
        return IndexRow(key: key, value: IndexRowValue.encode(key: key, offset: offset, value: value, truncated: truncated))
    }

    /// The logical row of one child (keyed by its location key).
    static func indexRow(ns: String, def d: IndexDef, location: Path, childKey: String, value: IndexValue) -> IndexRow {
        indexRow(prefix: IndexLocations.key(ns: ns, def: d, location: location), childKey: childKey, value: value)
    }
}

extension ByteWriter {
    mutating func indexValue(_ v: IndexValue) {
        switch v {
        case .null: u8(0)
        case .bool(let b): u8(b ? 2 : 1)
        case .number(let d): u8(3); f64(d)
        case .string(let s): u8(4); string(s)
        case .object: u8(5)
        }
    }
}

extension ByteReader {
    mutating func indexValue() throws -> IndexValue {
        switch try u8() {
        case 0: return .null
        case 1: return .bool(false)
        case 2: return .bool(true)
        case 3: return .number(try f64())
        case 4: return .string(try string())
        case 5: return .object
        case let t: throw StorageError.corrupt("index value tag \(t)")
        }
    }
}
