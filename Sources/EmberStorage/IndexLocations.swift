import CLMDB
import EmberCore

/// Index rows are keyed by a small id per index location (storage format 4).
///
/// Every child of an indexed location has one row, and format 3 began each row with the
/// location's key: namespace + 0x00 + definition id (8 bytes) + location encoding, 23 of the
/// ~42 bytes of a `{score: N}` child's row under `/items` in namespace `default`. `idxloc` maps
/// each location key once to an id (1 byte for the first 127 locations), and rows begin with the
/// id instead: the index of 1M such children takes ~60 % of the pages, and each random insert
/// batch copies fewer of them.
///
/// Ids are local to a data directory (allocated by the writer, never reused: `nextIdMetaKey`),
/// so snapshot streams carry rows keyed by location key, as format 3 stored them
/// (`forEachLogicalRow`), and installing assigns ids again (`convertLogicalRows`). A location
/// whose last row goes loses its id (`sweep`); a location written whole gets a fresh one, so its
/// rows land past the table's end (MDB_APPEND, full pages).
enum IndexLocations {
    /// The next id to allocate (u64); absent: 1.
    static let nextIdMetaKey = Array("indexLocations/next".utf8)
    /// Present while a directory may still hold rows of the format before 4 (`migrate`).
    static let pendingMetaKey = Array("layout/index-locations-pending".utf8)

    /// The key of one index location: the prefix of its rows up to format 3.
    static func key(ns: String, def: IndexDef, location: Path) -> [UInt8] {
        KeyCodec.namespacePrefix(ns) + def.id + KeyCodec.encode(location)
    }

    /// The prefix of the keys of every location of `def` at or below `path`.
    static func prefix(ns: String, def: IndexDef, under path: Path) -> [UInt8] {
        key(ns: ns, def: def, location: path)
    }

    // MARK: - Id encoding

    /// An id's bytes: prefix-free and order-preserving (byte order == numeric order), so one
    /// location's rows are one contiguous range and newer locations' rows sort after older
    /// ones'. The first byte's leading 1-bits count the bytes that follow (like UTF-8's lead
    /// byte): 1–127 in one byte, up to 2^14 − 1 in two, … up to 2^56 − 1 in eight. Id 0 is
    /// never used.
    static func encode(_ id: UInt64) -> [UInt8] {
        precondition(id > 0 && id < 1 << 56, "location id out of range")
        var extra = 0
        while extra < 7 && id >= UInt64(1) << UInt64(7 * (extra + 1)) { extra += 1 }
        var out = [UInt8](repeating: 0, count: extra + 1)
        var v = id
        for i in stride(from: extra, through: 1, by: -1) { out[i] = UInt8(v & 0xFF); v >>= 8 }
        // Lead byte: `extra` 1-bits, a 0-bit, then the id's high bits (none left for extra = 7).
        let marker: UInt8 = extra == 0 ? 0 : UInt8(truncatingIfNeeded: 0xFF00 >> extra)
        out[0] = marker | UInt8(v)
        return out
    }

    /// The id `bytes` encode (the inverse of `encode`).
    static func decode(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        let extra = bytes.count - 1
        var v = UInt64(bytes.first! & (extra >= 7 ? 0 : UInt8(0x7F) >> extra))
        for b in bytes.dropFirst() { v = v << 8 | UInt64(b) }
        return v
    }
}

extension Tables {
    /// The id of the location `locKey`, nil when it has none (no rows).
    func locationId(_ t: Txn, _ locKey: [UInt8]) throws -> [UInt8]? {
        try t.get(idxlocS, locKey)
    }

    /// The id of the location `locKey`, allocated when it has none.
    func allocateLocationId(_ t: Txn, _ locKey: [UInt8]) throws -> [UInt8] {
        if let id = try locationId(t, locKey) { return id }
        var next: UInt64 = 1
        if let v = try t.get(meta, IndexLocations.nextIdMetaKey), v.count == 8 {
            var r = ByteReader(v)
            next = try r.u64()
        }
        let id = IndexLocations.encode(next)
        var w = ByteWriter(capacity: 8)
        w.u64(next + 1)
        try t.put(meta, IndexLocations.nextIdMetaKey, w.bytes)
        try t.put(idxlocS, locKey, id)
        return id
    }

    /// Deletes the rows and ids of every location whose key starts with `prefix`.
    func dropLocations(_ t: Txn, under prefix: [UInt8]) throws {
        var ids: [[UInt8]] = []
        try t.scan(idxlocS, prefix: prefix) { _, id in ids.append(id); return true }
        if ids.isEmpty { return }
        for id in ids { try t.deletePrefix(idxS, id) }
        try t.deletePrefix(idxlocS, prefix)
    }

    /// Forgets the id of `locKey` when it is still `id` and no row is left under it.
    func sweep(_ t: Txn, _ locKey: [UInt8], id: [UInt8]) throws {
        guard try locationId(t, locKey) == id, try !t.hasPrefix(idxS, id) else { return }
        try t.delete(idxlocS, locKey)
    }

    /// Empties the index: rows, locations and the id counter.
    func dropAllIndexRows(_ t: Txn) throws {
        for dbi in [idx, idxx, idxloc, idxlocx] { try t.drop(dbi, delete: false) }
        _ = try t.delete(meta, IndexLocations.nextIdMetaKey)
    }

    /// One index row as format 3 stored it, keyed by its location key (what snapshot streams
    /// carry and what tests compare).
    struct LogicalIndexRow {
        /// Location key + index value encoding + child segment.
        var key: [UInt8]
        /// Where the index value starts in `key` (the location key's length).
        var valueStart: Int
        /// Where the child segment starts in `key`.
        var childOffset: Int
        /// The exact index value.
        var value: IndexValue
        /// The row's value in `idx`: empty, or (for a string cut in the key) offset + exact value.
        var stored: [UInt8]

        /// The value format 3 stored: empty unless the string was cut (`IndexRowValue.encode`).
        var compact: [UInt8] { stored.isEmpty ? [] : Self.full(childOffset, value) }
        /// Offset + exact value: what every version installs.
        var expanded: [UInt8] { Self.full(childOffset, value) }

        static func full(_ offset: Int, _ value: IndexValue) -> [UInt8] {
            var w = ByteWriter()
            w.u8(UInt8(offset >> 8)); w.u8(UInt8(offset & 0xFF))
            w.indexValue(value)
            return w.bytes
        }
    }

    /// Visits every index row in the order of its logical key (`LogicalIndexRow`): the
    /// locations in key order, each one's rows in order.
    func forEachLogicalRow(_ t: Txn, _ body: (LogicalIndexRow) throws -> Void) throws {
        try t.scan(idxlocS, prefix: []) { locKey, id in
            try t.scan(idxS, prefix: id) { k, v in
                let (value, off) = try IndexRowValue.decode(key: k, value: v, valueStart: id.count)
                guard off >= id.count, off <= k.count else { throw StorageError.corrupt("index row child offset") }
                var key = locKey
                key.append(contentsOf: k[id.count...])
                try body(LogicalIndexRow(key: key, valueStart: locKey.count, childOffset: off - id.count + locKey.count,
                                         value: value, stored: v))
                return true
            }
            return true
        }
    }

    /// Puts index rows given by their logical key and a value of either format before (offset +
    /// exact value, or empty when the key holds the value) under location ids, allocating them.
    /// `rows` yields (key, value) pairs, mostly in key order; rows of no definition are dropped.
    func putLogicalRows(_ t: Txn, depths: [[UInt8]: Int], _ rows: (( [UInt8], [UInt8]) throws -> Void) throws -> Void) throws {
        var lastLoc: [UInt8] = []
        var lastId: [UInt8] = []
        try rows { k, v in
            guard let start = try IndexRowValue.valueStart(k, depths) else { return }
            if lastId.isEmpty || lastLoc.count != start || !bytesStart(k, with: lastLoc) {
                lastLoc = Array(k[0..<start])
                lastId = try allocateLocationId(t, lastLoc)
            }
            let key = lastId + k[start...]
            var value = try IndexRowValue.compacted(key: k, value: v)
            if !value.isEmpty {
                var r = ByteReader(value)
                let off = Int(try r.u8()) << 8 | Int(try r.u8())
                guard off >= start, off <= k.count else { throw StorageError.corrupt("index row child offset") }
                value = Tables.LogicalIndexRow.full(off - start + lastId.count, try r.indexValue())
            }
            try t.putOrdered(idxS, key, value)
        }
    }

    /// Builds every defined index from the tree (after `dropAllIndexRows`).
    func buildAllIndexes(_ t: Txn) throws {
        let metaPrefix = Array("indexes/".utf8)
        var defs: [(String, [IndexDef])] = []
        try t.scan(meta, prefix: metaPrefix) { k, v in
            defs.append((String(decoding: k.dropFirst(metaPrefix.count), as: UTF8.self), try IndexDef.decodeList(v)))
            return true
        }
        let ap = Applier(tables: self, txn: t)
        for (ns, list) in defs {
            for d in list { try ap.build(ns: ns, def: d) }
        }
    }
}

extension IndexLocations {
    /// Rebuilds the indexes of a directory of a format before 4 (rows keyed by location key)
    /// when it opens, in one transaction: indexes are derived data, and a rebuild puts each
    /// location's rows in key order with MDB_APPEND (full pages). Returns whether it ran.
    @discardableResult
    static func migrate(_ env: OpaquePointer, _ tables: Tables) throws -> Bool {
        var p: OpaquePointer?
        try check(mdb_txn_begin(env, nil, 0, &p))
        guard let p else { throw StorageError.lmdb(code: -1, message: "mdb_txn_begin") }
        let t = Txn(ptr: p)
        do {
            guard try t.get(tables.meta, pendingMetaKey) != nil else { mdb_txn_abort(p); return false }
            try tables.dropAllIndexRows(t)
            try tables.buildAllIndexes(t)
            _ = try t.delete(tables.meta, pendingMetaKey)
        } catch {
            mdb_txn_abort(p)
            throw error
        }
        try check(mdb_txn_commit(p))
        return true
    }
}
