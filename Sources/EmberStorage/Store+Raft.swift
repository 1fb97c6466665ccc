import CLMDB
import EmberCore

/// Raft host primitives.
///
/// A follower calls `append(entries:)` for entries received from the leader (a conflicting
/// suffix is replaced; applied entries can never be replaced), and `applyCommitted(through:)`
/// when the leader's commit index advances: the entries are read back from the log and applied in
/// order, each in a nested transaction, with `appliedIndex` recorded in the same transaction.
/// A leader appends its own entries with `append` (assigning index/term/timestamp itself) and
/// applies them once committed. `submit` is the single-node shortcut that does both at once.
/// Hard state (`term`, `votedFor`) is persisted with `setHardState` before answering votes.
extension EmberStore {
    /// `encoded`, when given, holds each entry's encoding (a Raft host has it from the wire:
    /// the entry is then not encoded again). `validated`: the caller has already checked every
    /// entry's write as `validate` does (a Raft host checks a write once, where it is proposed;
    /// its followers append the leader's entries unchecked). Otherwise each is checked here.
    public func append(entries: [LogEntry], encoded: [[UInt8]]? = nil, validated: Bool = false) async throws {
        try checkEntries(entries, encoded: encoded, validated: validated)
        try await perform { w in try w.append(entries, encoded: encoded) }
    }

    /// The namespace of every entry (cheap; a bad one could not be stored), and unless
    /// `validated` the whole write (building its nodes: ~5 µs for a small one) — its size judged
    /// by the encoding given, or by encoding it when none is.
    func checkEntries(_ entries: [LogEntry], encoded: [[UInt8]]?, validated: Bool) throws {
        precondition(encoded == nil || encoded!.count == entries.count, "one encoding per entry")
        for (i, e) in entries.enumerated() {
            try KeyCodec.validateNamespace(e.namespace)
            guard !validated else { continue }
            if let encoded {
                try validate(entry: e, encodedBytes: encoded[i].count)
            } else {
                _ = try validate(namespace: e.namespace, operation: e.operation)
            }
        }
    }

    /// Applies log entries up to `index` (bounded by the last log index); returns their results.
    /// `metaSync` false: the transactions skip the meta page's sync (`MDB_NOMETASYNC`: the file
    /// stays consistent, the meta page reaches the disk with the next synced commit). Safe for
    /// entries already durable in the log: a system crash that undid the apply would have the
    /// node apply them again at restart. It shortens an idle follower's path from a commit to its
    /// listeners, but under load the unsynced meta page is written back with the next commit and
    /// can hold up the next write to its slot (REST in a cluster lost 9–17 %): for idle moments.
    @discardableResult
    public func applyCommitted(through index: UInt64, metaSync: Bool = true) async throws -> [WriteResult] {
        try await perform { w in try w.applyCommitted(through: index, metaSync: metaSync) }
    }

    /// Appends `entries` (if not already there) and applies them.
    @discardableResult
    public func apply(entries: [LogEntry]) async throws -> [WriteResult] {
        guard let last = entries.last else { return [] }
        let fresh = entries.filter { $0.index > lastLogIndex }
        if !fresh.isEmpty { try await append(entries: fresh) }
        return try await applyCommitted(through: last.index)
    }

    /// `append(entries:)` then `applyCommitted(through:)`, with the append and the first batch
    /// of the apply in ONE transaction: a Raft host's turn then costs one fsync instead of two.
    /// Entries are appended first, so `index` may reach into them.
    @discardableResult
    public func appendAndApply(entries: [LogEntry], encoded: [[UInt8]]? = nil, through index: UInt64,
                               validated: Bool = false) async throws -> [WriteResult] {
        try checkEntries(entries, encoded: encoded, validated: validated)
        return try await perform { w in try w.appendAndApply(entries, encoded: encoded, through: index) }
    }

    public func setHardState(_ h: HardState) async throws {
        try await perform { w in try w.setHardState(h) }
    }

    public func hardState() async throws -> HardState {
        try await perform { w in HardState(term: w.term, votedFor: w.votedFor) }
    }

    /// Log entries from `from` (inclusive), at most `maxCount`.
    public func entries(from: UInt64, maxCount: Int = 1_000) throws -> [LogEntry] {
        try withRead { t in
            var out: [LogEntry] = []
            try t.scan(tables.log, prefix: [], startingAt: Writer.logKey(from)) { _, v in
                out.append(try LogEntry(decoding: v))
                return out.count < maxCount
            }
            return out
        }
    }

    public func term(at index: UInt64) throws -> UInt64? {
        try withRead { t in
            guard let v = try t.get(tables.log, Writer.logKey(index)) else { return nil }
            return try LogEntry(decoding: v).term
        }
    }

    // MARK: - Snapshots

    /// Streams the whole state (trees, versions, indexes, index definitions, applied index and
    /// term) from one read transaction as chunks of about `maxChunkBytes`. Inline objects are
    /// streamed in the per-leaf form (`InlineObject.records`) and index rows with full values
    /// keyed by location key (`Tables.forEachLogicalRow`): the format every version installs. Chunk format: a
    /// sequence of records `[table u8][varint key length][key][varint value length][value]`; the
    /// first record (table 0xFF) is the header: applied index, term, last timestamp and (from
    /// storage format 3 on) the sender's storage format, which says its keys' text order. Tables: 0–2 tree, ver,
    /// idx; 5 meta; 6–8 their overflow twins (long keys, `SplitTable`), row for row; 3 and 9 the
    /// reverse index of the format before (`legacyReverseIndexRows`: nodes still running it
    /// need them; this version ignores them on install); 4 a marker older installers refuse.
    /// `legacyTriggers`: trigger state in 0.6.0's layout (`TriggerLegacyLayout`), for a stream a
    /// member of peer level 3 may install.
    public func snapshot(maxChunkBytes: Int = 1 << 20, legacyTriggers: Bool = false, _ body: ([UInt8]) throws -> Void) throws {
        try withRead { t in
            var chunk: [UInt8] = []
            var movedText = false
            func add(_ table: UInt8, _ k: [UInt8], _ v: [UInt8]) throws {
                if !movedText && table != 0xFF && table != 5 { movedText = k.contains { $0 == 0xF5 || $0 == 0xF6 } }
                var w = ByteWriter(bytes: chunk)
                chunk = []  // w must own the buffer alone, or every append copies the whole chunk
                w.u8(table); w.varint(k.count); w.bytes += k; w.varint(v.count); w.bytes += v
                chunk = w.bytes
                if chunk.count >= maxChunkBytes { try body(chunk); chunk = [] }
            }
            var h = ByteWriter()
            h.u64(try tables.metaU64(t, "applied")); h.u64(try tables.metaU64(t, "appliedTerm"))
            h.u64(try tables.metaU64(t, "lastTimestamp"))
            // Older installers read the first three fields only; this one learns the key text order.
            h.u64(UInt64(BuildInfo.storageFormat))
            try add(0xFF, [], h.bytes)
            // Inline objects go out as the per-leaf records and version row they stand for: the
            // stream is the format every version reads (a follower that predates them installs it).
            try t.scan(tables.tree, prefix: []) { k, v in
                guard v.first == InlineObject.tag else { try add(0, k, v); return true }
                let o = try InlineObject.decode(v)
                for (rk, rv) in o.records(at: k) { try add(0, rk, rv) }
                try add(1, k, o.versionRow)
                return true
            }
            try t.scan(tables.ver, prefix: []) { k, v in try add(1, k, v); return true }
            // Index rows keyed by location key with full values (`IndexRowValue`), as format 3
            // stored them (location ids are local, `IndexLocations`), for the same reason; long
            // keys as that format's overflow rows.
            try tables.forEachLogicalRow(t) { row in
                if row.key.count <= SplitTable.inlineBytes {
                    try add(2, row.key, row.expanded)
                } else {
                    try add(8, SplitTable.overflowKey(row.key), SplitTable.overflowRow(row.key, row.expanded))
                }
            }
            // Overflow twins of the tree and versions (long keys), copied row for row: their keys are deterministic.
            for (tag, dbi) in Self.overflowSnapshotTags(tables) where dbi != tables.idxx {
                try t.scan(dbi, prefix: []) { k, v in try add(tag, k, v); return true }
            }
            try Self.legacyReverseIndexRows(tables, t) { tag, k, v in try add(tag, k, v) }
            try t.scan(tables.meta, prefix: Array("indexes/".utf8)) { k, v in try add(5, k, v); return true }
            try t.scan(tables.meta, prefix: StoredRules.metaPrefix) { k, v in try add(5, k, v); return true }
            // The archive's position travels with the state (a base restores it; a follower installing
            // a snapshot keeps holding what the archive lacks).
            try t.scan(tables.meta, prefix: ArchiveMark.metaPrefix) { k, v in try add(5, k, v); return true }
            // Trigger definitions, cursors, outboxes and dead letters: a follower that installs
            // this snapshot resumes delivery where the leader's state was.
            if legacyTriggers {
                try TriggerLegacyLayout.rows(tables, t) { k, v in try add(5, k, v) }
            } else {
                try TriggerChangeLog.fullRows(tables, t) { k, v in try add(5, k, v) }
            }
            // Keys whose text format 2 would store otherwise (U+E000–U+FFFF): a record of a table
            // format 2 does not know, so a member of 0.4.0 refuses the whole install rather than
            // store them in the wrong order (its install is one transaction; it stays behind).
            if movedText { try add(4, [], [UInt8(BuildInfo.storageFormat)]) }
            if !chunk.isEmpty { try body(chunk) }
        }
    }

    /// Replaces the whole state with a snapshot's chunks (in order). The log is emptied and
    /// restarts after the snapshot's applied index.
    public func installSnapshot(chunks: [[UInt8]]) async throws {
        try await perform { w in try w.installSnapshot(chunks) }
    }

    /// Snapshot tags of the overflow tables (`SplitTable`); 0–2 are their main twins, 5 meta.
    static func overflowSnapshotTags(_ tables: Tables) -> [(UInt8, MDB_dbi)] {
        [(6, tables.treex), (7, tables.verx), (8, tables.idxx)]
    }

    /// The rows of the reverse index table that the format before kept (`idxrev`, tag 3, and
    /// its overflow twin `idxrevx`, tag 9), derived from the index rows: for a row
    /// `location prefix + value + child segment`, `location prefix + child segment` → that key.
    /// A follower still running that format installs a snapshot from this version with them
    /// and maintains its index as before. Costs the snapshot what it cost before (not the disk).
    static func legacyReverseIndexRows(_ tables: Tables, _ t: Txn, _ body: (UInt8, [UInt8], [UInt8]) throws -> Void) throws {
        try tables.forEachLogicalRow(t) { row in
            let rev = Array(row.key[0..<row.valueStart]) + row.key[row.childOffset...]
            if rev.count <= SplitTable.inlineBytes {
                try body(3, rev, row.key)
            } else {
                try body(9, SplitTable.overflowKey(rev), SplitTable.overflowRow(rev, row.key))
            }
        }
    }

    // MARK: - State hash

    /// SHA-1 (hex) over the tree records of one namespace, or of all when nil. Equal on replicas
    /// holding equal data: over 1 MiB runs of `key, value` bytes, then over those digests.
    public func stateHash(namespace: String? = nil) throws -> String {
        if let namespace { try KeyCodec.validateNamespace(namespace) }
        let prefix = namespace.map { KeyCodec.namespacePrefix($0) } ?? []
        return try withVisibleRead { t in try Self.stateHash(t, tables: tables, prefix: prefix) }
    }

    /// The state hash and the applied index it is the hash at, from one read transaction: what
    /// members compare (`stateHash()` alone may include writes applied after a separately read
    /// index).
    public func stateHashAtApplied() throws -> (applied: UInt64, hash: String) {
        let m = try measuredStateHashAtApplied()
        return (m.applied, m.hash)
    }

    /// `stateHashAtApplied`, with the bytes the hash scanned (what the next full hash will cost:
    /// the archiver spaces its hashes by it).
    public func measuredStateHashAtApplied() throws -> (applied: UInt64, hash: String, bytes: Int) {
        try withVisibleRead { t in
            let applied = try tables.metaU64(t, "applied")
            var bytes = 0
            let hash = try Self.stateHash(t, tables: tables, prefix: [], bytes: &bytes)
            return (applied, hash, bytes)
        }
    }

    static func stateHash(_ t: Txn, tables: Tables, prefix: [UInt8]) throws -> String {
        var bytes = 0
        return try stateHash(t, tables: tables, prefix: prefix, bytes: &bytes)
    }

    static func stateHash(_ t: Txn, tables: Tables, prefix: [UInt8], bytes: inout Int) throws -> String {
        var hasher = StateHasher()
        defer { bytes = hasher.totalBytes }
        // Data only: a leaf's kept version (history) is left out, hashed as a plain leaf; an
        // inline object as the per-leaf records it stands for (in the same key order).
        func add<K: Collection<UInt8>>(_ k: K, _ v: UnsafeRawBufferPointer) throws {
            if v.first == InlineObject.tag {
                for (rk, rv) in try InlineObject.decode(Array(v)).records(at: Array(k)) { hasher.add(rk, rv) }
            } else if v.first == 3 && v.count > 9 {
                hasher.add(k, head: 1, UnsafeRawBufferPointer(rebasing: v[1..<(v.count - 8)]))
            } else {
                hasher.add(k, v)
            }
        }
        // In full-key order over `tree` and `treex`: the same bytes as before long keys existed.
        // Without long keys (`treex` empty), straight from LMDB's pages.
        if try t.hasOverflow(tables.treeS) {
            try t.scan(tables.treeS, prefix: prefix) { k, v in
                try v.withUnsafeBytes { try add(k, $0) }
                return true
            }
        } else {
            try t.scanBorrowed(tables.treeS.main, prefix: prefix) { k, v in
                try add(k, v)
                return true
            }
        }
        return hasher.finish()
    }
}

extension String {
    init(format2 b: UInt8) {
        let hex = Array("0123456789abcdef")
        self = String([hex[Int(b >> 4)], hex[Int(b & 15)]])
    }
}

extension Writer {
    /// The table a snapshot install stages its index rows in (dropped before its transaction ends).
    static let indexStagingTable = "idx-staging"

    func installSnapshot(_ chunks: [[UInt8]]) throws {
        var it = chunks.makeIterator()
        try installSnapshot(next: { it.next() })
    }

    /// Replaces the state with the snapshot chunks `next` yields (nil at the end), in ONE write
    /// transaction, so a failure part-way leaves the old state. Only one chunk is held at a time.
    func installSnapshot(next: () throws -> [UInt8]?) throws {
        var a: UInt64 = 0, aTerm: UInt64 = 0, ts: Int64 = 0
        var sawHeader = false
        var senderFormat: UInt64 = 0
        var rules: [String: StoredRules] = [:]
        var triggerSets: [String: TriggerSet] = [:]
        decoded.removeAll()  // the log is replaced
        try writeTxn { t in
            for dbi in [tables.tree, tables.ver] {
                try t.drop(dbi, delete: false)
            }
            // The log goes with the state it led to: every table of a single archiving node's
            // ring (`LogRing`), not only `log`, whose rows no reader would take after the install
            // (their indexes are not the new log's) and whose pages would stay held.
            try LogRing.reset(tables, t)
            for (_, dbi) in EmberStore.overflowSnapshotTags(tables) { try t.drop(dbi, delete: false) }
            try tables.dropAllIndexRows(t)
            // Index rows come keyed by location key (`IndexLocations`), before or after the
            // definitions that say where a key's location ends: staged as they come, put under
            // location ids once the stream is in.
            var staging: MDB_dbi = 0
            try check(mdb_dbi_open(t.ptr, Self.indexStagingTable, flag(MDB_CREATE), &staging))
            try t.drop(staging, delete: false)
            var longRows: [([UInt8], [UInt8])] = []
            try t.deletePrefix(tables.meta, Array("indexes/".utf8))
            try t.deletePrefix(tables.meta, StoredRules.metaPrefix)
            try t.deletePrefix(tables.meta, TriggerKeys.prefix)
            try t.drop(tables.trigrec, delete: false)
            // Each table's rows come in key order (versions in two runs): full pages.
            var ordered = DenseCopy.OrderedPuts()
            while let chunk = try next() {
                var r = ByteReader(chunk)
                while !r.atEnd {
                    let tag = try r.u8()
                    let kn = try r.varint()
                    guard r.i + kn <= chunk.count else { throw StorageError.corrupt("snapshot key") }
                    let k = Array(chunk[r.i..<r.i + kn]); r.i += kn
                    let vn = try r.varint()
                    guard r.i + vn <= chunk.count else { throw StorageError.corrupt("snapshot value") }
                    let v = Array(chunk[r.i..<r.i + vn]); r.i += vn
                    switch tag {
                    case 0: try ordered.put(t, tables.tree, k, v)
                    case 1: try ordered.put(t, tables.ver, k, v)
                    case 2: try ordered.put(t, staging, k, v)
                    case 3, 9: break  // the reverse index of the format before: derived now
                    case 4: break  // format 3's marker for older installers (see `snapshot`)
                    case 8: longRows.append(try SplitTable.decodeRow(v))
                    case 6, 7: try t.put(EmberStore.overflowSnapshotTags(tables)[Int(tag) - 6].1, k, v)
                    case 5:
                        if TriggerChangeLog.isRecordRow(k) {
                            // A shared change record in format 6's layout (every sender's): to its table
                            // (a format-7 sender's come in the table's order: full pages).
                            let (ns, group, index) = TriggerChangeLog.legacyRow(k)
                            try t.putOrdered(tables.trigrec, TriggerRecordRows.key(index, TriggerRecordRows.stream(ns, group)), v)
                        } else {
                            try t.put(tables.meta, k, v)
                        }
                    case 0xFF:
                        var h = ByteReader(v)
                        a = try h.u64(); aTerm = try h.u64(); ts = Int64(bitPattern: try h.u64())
                        senderFormat = h.atEnd ? 2 : try h.u64()
                        sawHeader = true
                    default: throw StorageError.corrupt("snapshot table \(tag)")
                    }
                }
            }
            guard sawHeader else { throw StorageError.corrupt("snapshot without header") }
            try tables.noteOverflowRows(t)
            try tables.putMetaU64(t, "applied", a)
            try tables.putMetaU64(t, "appliedTerm", aTerm)
            try tables.putMetaU64(t, "lastIndex", a)
            try tables.putMetaU64(t, "lastTerm", aTerm)
            try tables.putMetaU64(t, "firstIndex", a + 1)
            try tables.putMetaU64(t, "lastTimestamp", UInt64(bitPattern: ts))
            // A stream of a member before storage format 3 (a rolling upgrade; an old backup)
            // has its key text in code point order: put it in this format's order.
            if senderFormat < 3 {
                try TextOrderMigration.all(tables, t)
                // Its index rows too: built again from the tree (what they are derived from).
                try tables.buildAllIndexes(t)
            } else {
                let depths = try IndexRowValue.depths(tables, t)
                try tables.putLogicalRows(t, depths: depths) { put in
                    // Staged rows leave the scratch table as they move (its pages are reused at once).
                    let c = try t.cursor(staging)
                    defer { c.close() }
                    var row = try c.first()
                    while let (k, v) = row {
                        try put(k, v)
                        try c.deleteCurrent()
                        row = try c.next()
                    }
                    for (k, v) in longRows { try put(k, v) }
                }
            }
            try t.drop(staging, delete: true)
            rules = try StoredRules.loadAll(tables, t)
            try TriggerRecordRows.rebuildHeads(tables, t)
            // A stream from a 0.6.0 member: its triggers join their shared change records.
            try TriggerChangeLog.migrate(tables, t)
            triggerSets = try tables.allTriggerSets(t)
            // The stream is per leaf (every version installs it): small objects become inline
            // records again, in this same transaction.
            if tables.inlineObjects {
                // Rewriting thins the tree and version pages (rows were put full): written again, full.
                if try Reinline.all(tables, t) > 0 {
                    for dbi in [tables.tree, tables.ver] { try DenseCopy.rewrite(t, dbi) }
                }
                try t.put(tables.meta, Reinline.doneMetaKey, [1])
            }
        }
        applied = a; appliedTerm = aTerm; lastIndex = a; lastTerm = aTerm; firstIndex = a + 1
        lastTimestamp = max(lastTimestamp, ts)
        defsCache = [:]
        storedRules = rules
        storedTriggers = triggerSets
        publishRules()
        publishState()
    }
}

extension Writer {
    /// One transaction: replace the log from `entries[0].index` on (as `append`), then apply up to
    /// `target` (at most `maxBatchEntries`; any rest goes through `applyCommitted`).
    func appendAndApply(_ entries: [LogEntry], encoded: [[UInt8]]? = nil, through target: UInt64) throws -> [WriteResult] {
        guard let first = entries.first, let last = entries.last else { return try applyCommitted(through: target) }
        for (a, b) in zip(entries, entries.dropFirst()) where b.index != a.index + 1 {
            throw StorageError.logMismatch("entries are not contiguous at \(b.index)")
        }
        guard first.index > applied else { throw StorageError.logMismatch("entry \(first.index) is already applied (\(applied))") }
        guard first.index <= lastIndex + 1 else { throw StorageError.logMismatch("gap: last is \(lastIndex), got \(first.index)") }
        let stop = hashPoints.cap(min(target, last.index, applied + UInt64(store.options.maxBatchEntries)), applied: applied)
        guard stop > applied else {
            try append(entries, encoded: encoded)
            return []
        }
        let results = try applyBatch(through: stop, appending: entries, encoded: encoded)
        return results + (try applyCommitted(through: target))
    }
}
