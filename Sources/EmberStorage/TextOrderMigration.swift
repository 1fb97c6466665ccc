import CLMDB
import EmberCore

/// Storage format 3 keeps text in keys (path segments, index string values) through
/// `KeyOrder.textOrderByte`, so LMDB's byte order is Firebase's UTF-16 order. Formats 1–2 kept
/// plain UTF-8 (code point order): the two differ only for text holding U+E000–U+FFFF (lead bytes
/// 0xEE/0xEF), so only keys with those bytes are rewritten, in place of the old ones.
///
/// The pass is idempotent (a rewritten key has no 0xEE/0xEF left in its text; 0xEE/0xEF outside
/// text, in an integer key's binary prefix or a number, are left alone because every key is
/// parsed) and resumable: `pendingMetaKey` is set with the format mark and cleared by the last
/// transaction, so a node killed part-way finishes the pass on its next open.
enum TextOrderMigration {
    /// Rows rewritten per write transaction when a directory is migrated on open.
    static let rowsPerTransaction = 20_000
    /// Present while a directory may still hold keys in the format-2 text order.
    static let pendingMetaKey = Array("layout/text-order-pending".utf8)

    /// Runs the pass on a directory being opened, when pending; returns the rows rewritten.
    static func migrate(_ env: OpaquePointer, _ tables: Tables) throws -> Int {
        var total = 0
        var resume: [[UInt8]?] = [nil, nil, nil]
        while true {
            var p: OpaquePointer?
            try check(mdb_txn_begin(env, nil, 0, &p))
            guard let p else { throw StorageError.lmdb(code: -1, message: "mdb_txn_begin") }
            let t = Txn(ptr: p)
            let done: Bool
            do {
                if try t.get(tables.meta, pendingMetaKey) == nil { mdb_txn_abort(p); return total }
                let (n, finished) = try pass(tables, t, resume: &resume, maxRows: rowsPerTransaction)
                total += n
                done = finished
                if done { _ = try t.delete(tables.meta, pendingMetaKey) }
            } catch {
                mdb_txn_abort(p)
                throw error
            }
            try check(mdb_txn_commit(p))
            if done { return total }
        }
    }

    /// The whole pass in one transaction (a snapshot stream from a format-2 member, installed).
    @discardableResult
    static func all(_ tables: Tables, _ t: Txn) throws -> Int {
        var total = 0
        var resume: [[UInt8]?] = [nil, nil, nil]
        while true {
            let (n, finished) = try pass(tables, t, resume: &resume, maxRows: rowsPerTransaction)
            total += n
            if finished { return total }
        }
    }

    /// Rewrites up to `maxRows` keys, continuing each main table from `resume`; true when done.
    private static func pass(_ tables: Tables, _ t: Txn, resume: inout [[UInt8]?], maxRows: Int) throws -> (Int, Bool) {
        let depths = try IndexRowValue.depths(tables, t)
        var rewritten = 0
        for (n, split) in [tables.treeS, tables.verS, tables.idxS].enumerated() {
            let isIndex = n == 2
            var moves: [(old: [UInt8], new: [UInt8], value: [UInt8])] = []
            var more = false
            try t.scan(split.main, prefix: [], startingAt: resume[n]) { k, v in
                guard moves.count < maxRows - rewritten else { more = true; resume[n] = k; return false }
                if let new = try migrated(k, index: isIndex ? depths : nil) { moves.append((k, new, v)) }
                return true
            }
            for m in moves {
                _ = try t.delete(split.main, m.old)
                try t.put(split, m.new, m.value)
            }
            rewritten += moves.count
            if more { return (rewritten, false) }
            resume[n] = [UInt8](repeating: 0xFF, count: 1)  // this table is done
            // Overflow twins (long keys) are few: read whole, rewritten in this transaction.
            var overMoves: [(old: [UInt8], new: [UInt8], value: [UInt8])] = []
            try t.scan(split.over, prefix: []) { _, row in
                let (full, value) = try SplitTable.decodeRow(row)
                if let new = try migrated(full, index: isIndex ? depths : nil) { overMoves.append((full, new, value)) }
                return true
            }
            for m in overMoves {
                _ = try t.delete(split, m.old)
                try t.put(split, m.new, m.value)
            }
            rewritten += overMoves.count
        }
        return (rewritten, true)
    }

    /// `key` with its text in format-3 order, or nil when nothing changes. `index`: the
    /// definitions' depths when `key` is an index row (`IndexRowValue.depths`).
    static func migrated(_ key: [UInt8], index depths: [[UInt8]: Int]?) throws -> [UInt8]? {
        guard key.contains(where: { $0 == 0xEE || $0 == 0xEF }) else { return nil }
        guard let zero = key.firstIndex(of: 0) else { throw StorageError.corrupt("key without namespace") }
        var out = key
        var i = zero + 1
        if let depths {
            guard key.count >= zero + 9 else { throw StorageError.corrupt("index row") }
            // A row of no definition is dropped when its definition is; leave it.
            guard let levels = depths[Array(key[0..<zero + 9])] else { return nil }
            i = zero + 9
            for _ in 0..<levels { try mapSegment(&out, &i) }
            try mapIndexValue(&out, &i)
            try mapSegment(&out, &i)
        } else {
            while i < out.count { try mapSegment(&out, &i) }
        }
        return out == key ? nil : out
    }

    private static func mapSegment(_ b: inout [UInt8], _ i: inout Int) throws {
        guard i < b.count else { throw StorageError.corrupt("key segment") }
        switch b[i] {
        case 0x01:
            guard i + 7 <= b.count else { throw StorageError.corrupt("key segment") }
            i += 7 + (Int(b[i + 5]) << 8 | Int(b[i + 6])) + 1
        case 0x02:
            var j = i + 1
            while j < b.count && b[j] != 0 { b[j] = KeyOrder.textOrderByte(b[j]); j += 1 }
            i = j + 1
        default:
            throw StorageError.corrupt("key segment tag \(b[i])")
        }
        guard i <= b.count else { throw StorageError.corrupt("key segment") }
    }

    private static func mapIndexValue(_ b: inout [UInt8], _ i: inout Int) throws {
        guard i < b.count else { throw StorageError.corrupt("index value") }
        switch b[i] {
        case 0x10, 0x20, 0x30, 0x60: i += 1
        case 0x40: i += 9
        case 0x50:
            i += 1
            while i + 1 < b.count {
                if b[i] != 0 { b[i] = KeyOrder.textOrderByte(b[i]); i += 1; continue }
                i += 2  // 0x00 0xFF (an escaped 0x00) or the terminator 0x00 0x01/0x02
                if b[i - 1] != 0xFF { return }
            }
            throw StorageError.corrupt("index string")
        default:
            throw StorageError.corrupt("index value tag \(b[i])")
        }
    }
}
