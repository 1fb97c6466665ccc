import CLMDB
import EmberCore
import Foundation
import Synchronization

/// A logical table whose keys may be longer than LMDB's 511-byte key limit, over two databases.
///
/// Firebase allows 32 levels of 768-byte keys (an encoded path of up to ~25 KB), LMDB keys hold
/// 511 bytes. A key of at most `inlineBytes` lives in `main` under itself (every key of a short
/// path: the common case costs what a single table costs). A longer key lives in `over` under
/// its first `inlineBytes` bytes (its "group") + the SHA-1 of the whole key; the row's value is
/// `varint length, full key, value`. Groups sort like their keys' prefixes, so all long keys
/// starting with a prefix are one contiguous range of `over`; inside a group rows sort by hash,
/// so a group is read whole and sorted in memory by full key when a cursor enters it. Merging
/// the two sides in byte order gives exactly the order of the full keys (= Firebase order).
///
/// Cost: an operation under a long prefix reads its whole group, so writes and queries under a
/// parent whose key exceeds `inlineBytes` grow linearly with the long keys sharing that group
/// (docs/STORAGE.md "Keys and paths"); leaf reads are point reads. Short keys never touch `over`.
struct SplitTable {
    let main: MDB_dbi
    let over: MDB_dbi
    /// Whether `over` may hold rows (see `OverflowUse`).
    let used: OverflowUse

    /// Longest key kept in `main` (and the group prefix length in `over`); 480 + 20 ≤ 511.
    static let inlineBytes = 480
    static let hashBytes = 20

    static func overflowKey(_ key: [UInt8]) -> [UInt8] {
        assert(key.count > inlineBytes)
        return Array(key[0..<inlineBytes]) + SHA1.digest(key)
    }

    static func overflowRow(_ key: [UInt8], _ value: [UInt8]) -> [UInt8] {
        var w = ByteWriter()
        w.varint(key.count)
        w.bytes.reserveCapacity(w.bytes.count + key.count + value.count)
        w.bytes += key
        w.bytes += value
        return w.bytes
    }

    /// Whether the full key in `row` starts with `prefix` (and, with `exactly`, is `prefix`),
    /// without copying it out: group reads test every row of a group.
    static func rowKey(_ row: [UInt8], startsWith prefix: [UInt8], exactly: Bool = false) throws -> Bool {
        var r = ByteReader(row)
        let n = try r.varint()
        guard n > inlineBytes, r.i + n <= row.count else { throw StorageError.corrupt("overflow row") }
        if n < prefix.count || (exactly && n != prefix.count) { return false }
        if prefix.isEmpty { return true }
        let start = r.i
        return row.withUnsafeBytes { x in prefix.withUnsafeBytes { y in memcmp(x.baseAddress! + start, y.baseAddress!, prefix.count) } } == 0
    }

    static func decodeRow(_ row: [UInt8]) throws -> ([UInt8], [UInt8]) {
        var r = ByteReader(row)
        let n = try r.varint()
        guard n > inlineBytes, r.i + n <= row.count else { throw StorageError.corrupt("overflow row") }
        return (Array(row[r.i..<r.i + n]), Array(row[(r.i + n)...]))
    }
}

/// Per table and store: false while `over` has never held a row since the store opened empty of
/// them, so reads of short paths skip even the O(1) `mdb_stat` (measured: it cost short `$key`
/// queries ~15%). Set by the writer before it commits a first overflow row (a reader that sees
/// that commit sees the flag); never cleared, so a stale true only costs that check.
final class OverflowUse: Sendable {
    private let flag: Atomic<Bool>
    init(_ used: Bool) { flag = Atomic(used) }
    var mayHaveRows: Bool { flag.load(ordering: .acquiring) }
    func markUsed() { if !flag.load(ordering: .relaxed) { flag.store(true, ordering: .releasing) } }
}

/// Byte-order comparisons of long keys with `memcmp` (the generic `Sequence` ones dominate
/// overflow group reads otherwise).
func bytesLess(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    let n = min(a.count, b.count)
    let c = n == 0 ? 0 : a.withUnsafeBytes { x in b.withUnsafeBytes { y in memcmp(x.baseAddress!, y.baseAddress!, n) } }
    return c != 0 ? c < 0 : a.count < b.count
}

func bytesStart(_ a: [UInt8], with p: [UInt8]) -> Bool {
    guard a.count >= p.count else { return false }
    if p.isEmpty { return true }
    return a.withUnsafeBytes { x in p.withUnsafeBytes { y in memcmp(x.baseAddress!, y.baseAddress!, p.count) } } == 0
}

extension Txn {
    /// Whether `s` has any overflow row (an O(1) read of the database record in this transaction).
    func hasOverflow(_ s: SplitTable) throws -> Bool {
        guard s.used.mayHaveRows else { return false }
        return try overflowRows(s.over) > 0
    }

    func overflowRows(_ over: MDB_dbi) throws -> Int {
        var st = MDB_stat()
        try check(mdb_stat(ptr, over, &st))
        return st.ms_entries
    }

    func get(_ s: SplitTable, _ key: [UInt8]) throws -> [UInt8]? {
        if key.count <= SplitTable.inlineBytes { return try get(s.main, key) }
        guard let row = try get(s.over, SplitTable.overflowKey(key)) else { return nil }
        let (k, v) = try SplitTable.decodeRow(row)
        return k == key ? v : nil
    }

    func put(_ s: SplitTable, _ key: [UInt8], _ value: [UInt8]) throws {
        if key.count <= SplitTable.inlineBytes { return try put(s.main, key, value) }
        let ok = SplitTable.overflowKey(key)
        if let row = try get(s.over, ok), try SplitTable.decodeRow(row).0 != key {
            throw StorageError.corrupt("SHA-1 collision of two overflow keys")
        }
        s.used.markUsed()
        try put(s.over, ok, SplitTable.overflowRow(key, value))
    }

    /// `put` with MDB_APPEND where the key lands past the main table's end (`Txn.putOrdered`).
    /// Returns false when the key was found at or below the main table's end (a long key, put
    /// in `over`, says nothing of it: true).
    @discardableResult
    func putOrdered(_ s: SplitTable, _ key: [UInt8], _ value: [UInt8]) throws -> Bool {
        if key.count <= SplitTable.inlineBytes { return try putOrdered(s.main, key, value) }
        try put(s, key, value)
        return true
    }

    @discardableResult
    func delete(_ s: SplitTable, _ key: [UInt8]) throws -> Bool {
        if key.count <= SplitTable.inlineBytes { return try delete(s.main, key) }
        let ok = SplitTable.overflowKey(key)
        guard let row = try get(s.over, ok), try SplitTable.decodeRow(row).0 == key else { return false }
        return try delete(s.over, ok)
    }

    func cursor(_ s: SplitTable, within prefix: [UInt8], keysOnly: Bool = false) throws -> SplitCursor {
        let main = try cursor(s.main)
        do {
            let over = try hasOverflow(s) ? cursor(s.over) : nil
            return SplitCursor(main: main, over: over, prefix: prefix, keysOnly: keysOnly)
        } catch {
            main.close()
            throw error
        }
    }

    /// Visits every record whose key starts with `prefix`, in full-key order.
    func scan(_ s: SplitTable, prefix: [UInt8], _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
        // Without overflow rows: the plain scan (short paths pay nothing for long-key support).
        guard try hasOverflow(s) else { return try scan(s.main, prefix: prefix, body) }
        var c = try cursor(s, within: prefix)
        defer { c.close() }
        var entry = try c.seek(prefix)
        while let (k, v) = entry, bytesStart(k, with: prefix) {
            if try !body(k, v) { return }
            entry = try c.next()
        }
    }

    /// Deletes every record whose key starts with `prefix`; returns how many. `using`: an open
    /// cursor on `s.main` (`Txn.deletePrefix`).
    @discardableResult
    func deletePrefix(_ s: SplitTable, _ prefix: [UInt8], excludingExact: Bool = false, using open: Cursor? = nil) throws -> Int {
        var n = try deletePrefix(s.main, prefix, excludingExact: excludingExact, using: open)
        guard try hasOverflow(s) else { return n }
        let c = try cursor(s.over)
        defer { c.close() }
        let group = Array(prefix.prefix(SplitTable.inlineBytes))
        var entry = try c.seek(group)
        while let (ok, row) = entry, bytesStart(ok, with: group) {
            if try SplitTable.rowKey(row, startsWith: prefix),
               try !(excludingExact && SplitTable.rowKey(row, startsWith: prefix, exactly: true)) {
                try c.deleteCurrent()
                n += 1
                // After `mdb_cursor_del` the cursor rests on the following record; MDB_NEXT returns it.
            }
            entry = try c.next()
        }
        return n
    }

    /// True when some key starts with `prefix`.
    func hasPrefix(_ s: SplitTable, _ prefix: [UInt8]) throws -> Bool {
        if try hasPrefix(s.main, prefix) { return true }
        guard try hasOverflow(s) else { return false }
        let c = try cursor(s.over)
        defer { c.close() }
        if prefix.count <= SplitTable.inlineBytes {
            guard let k = try c.seekKey(prefix) else { return false }
            return bytesStart(k, with: prefix)
        }
        let group = Array(prefix[0..<SplitTable.inlineBytes])
        var entry = try c.seek(group)
        while let (ok, row) = entry, bytesStart(ok, with: group) {
            if try SplitTable.rowKey(row, startsWith: prefix) { return true }
            entry = try c.next()
        }
        return false
    }
}

/// A cursor over one prefix (`prefix`) of a split table, in full-key order. Positioning calls
/// (`seek`, `seekLastLT`, `seekLastLE`) may return records outside the prefix (callers check, as
/// with a plain cursor) but never overflow rows outside it. After `seek` only `next` moves it,
/// after `seekLast…` only `prev`.
struct SplitCursor {
    let main: Cursor
    /// nil when the table has no overflow row: then this is exactly a plain cursor.
    let over: Cursor?
    let prefix: [UInt8]
    let keysOnly: Bool
    private let groupPrefix: [UInt8]

    private var m: ([UInt8], [UInt8])?
    private var o: ([UInt8], [UInt8])?
    private var forward = true
    /// The overflow group read last (its prefix and its rows sorted by full key) and `o`'s place in it.
    private var group: [UInt8]?
    private var rows: [([UInt8], [UInt8])] = []
    private var gi = 0

    init(main: Cursor, over: Cursor?, prefix: [UInt8], keysOnly: Bool) {
        self.main = main
        self.over = over
        self.prefix = prefix
        self.keysOnly = keysOnly
        // No copy (no allocation) unless the prefix is itself longer than a group prefix.
        groupPrefix = prefix.count <= SplitTable.inlineBytes ? prefix : Array(prefix[0..<SplitTable.inlineBytes])
    }

    func close() {
        main.close()
        over?.close()
    }

    private var currentIsMain: Bool {
        guard let o else { return true }
        guard let m else { return false }
        return forward ? bytesLess(m.0, o.0) : bytesLess(o.0, m.0)
    }

    private var current: ([UInt8], [UInt8])? { currentIsMain ? m : o }

    // MARK: Forward

    /// First record with key >= `key`.
    mutating func seek(_ key: [UInt8]) throws -> ([UInt8], [UInt8])? {
        forward = true
        m = try keysOnly ? main.seekKey(key).map { ($0, []) } : main.seek(key)
        o = try over == nil ? nil : overSeekGE(key)
        return current
    }

    mutating func seekKey(_ key: [UInt8]) throws -> [UInt8]? {
        guard over != nil else {
            // No overflow rows: a plain seek (`$key` queries and shallow reads seek once per child).
            forward = true
            let k = try main.seekKey(key)
            m = k.map { ($0, []) }
            return k
        }
        return try seek(key)?.0
    }

    mutating func next() throws -> ([UInt8], [UInt8])? {
        precondition(forward, "next after a backward positioning")
        if currentIsMain {
            guard m != nil else { return nil }
            m = try keysOnly ? main.nextKey().map { ($0, []) } : main.next()
        } else {
            o = try overNext()
        }
        return current
    }

    // MARK: Backward

    /// Last record with key < `key`.
    mutating func seekLastLT(_ key: [UInt8]) throws -> ([UInt8], [UInt8])? {
        forward = false
        if over == nil {
            m = try main.seekLastLT(key)
            return m
        }
        m = try main.seekLastLT(key)
        o = try over == nil ? nil : overSeekBelow(key, orEqual: false)
        return current
    }

    /// Last record with key <= `key`.
    mutating func seekLastLE(_ key: [UInt8]) throws -> ([UInt8], [UInt8])? {
        forward = false
        m = try main.seekLastLE(key)
        o = try over == nil ? nil : overSeekBelow(key, orEqual: true)
        return current
    }

    mutating func prev() throws -> ([UInt8], [UInt8])? {
        precondition(!forward, "prev after a forward positioning")
        if currentIsMain {
            guard m != nil else { return nil }
            m = try main.prev()
        } else {
            o = try overPrev()
        }
        return current
    }

    // MARK: Overflow side

    /// Reads the group `g` (rows whose overflow key starts with it, restricted to `prefix`).
    private mutating func load(_ g: [UInt8]) throws {
        if group == g { return }
        rows = []
        var entry = try over!.seek(g)
        while let (ok, row) = entry, bytesStart(ok, with: g) {
            if try SplitTable.rowKey(row, startsWith: prefix) { rows.append(try SplitTable.decodeRow(row)) }
            entry = try over!.next()
        }
        rows.sort { bytesLess($0.0, $1.0) }
        group = g
    }

    /// The group of an overflow key.
    private func groupOf(_ ok: [UInt8]) -> [UInt8] { Array(ok.prefix(SplitTable.inlineBytes)) }

    /// First index in `rows` whose key is >= `key` (> when `strictly`).
    private func lowerBound(_ key: [UInt8], strictly: Bool = false) -> Int {
        var lo = 0, hi = rows.count
        while lo < hi {
            let mid = (lo + hi) / 2
            let below = strictly ? !bytesLess(key, rows[mid].0) : bytesLess(rows[mid].0, key)
            if below { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// First overflow row in `prefix` with key >= `key`. Groups after the group of `key` hold
    /// only greater keys, so at most the group of `key` and the next one are read.
    private mutating func overSeekGE(_ key: [UInt8]) throws -> ([UInt8], [UInt8])? {
        var seekTo = Array(key.prefix(SplitTable.inlineBytes))
        if bytesLess(seekTo, groupPrefix) { seekTo = groupPrefix }
        while let ok = try over!.seekKey(seekTo), bytesStart(ok, with: groupPrefix) {
            let g = groupOf(ok)
            try load(g)
            let i = lowerBound(key)
            if i < rows.count { gi = i; return rows[i] }
            guard let after = KeyCodec.prefixEnd(g) else { return nil }
            seekTo = after
        }
        return nil
    }

    private mutating func overNext() throws -> ([UInt8], [UInt8])? {
        guard let g = group else { return nil }
        if gi + 1 < rows.count { gi += 1; return rows[gi] }
        guard let after = KeyCodec.prefixEnd(g) else { return nil }
        var seekTo = after
        while let ok = try over!.seekKey(seekTo), bytesStart(ok, with: groupPrefix) {
            let ng = groupOf(ok)
            try load(ng)
            if !rows.isEmpty { gi = 0; return rows[0] }
            guard let a = KeyCodec.prefixEnd(ng) else { return nil }
            seekTo = a
        }
        return nil
    }

    /// Last overflow row in `prefix` with key < `key` (<= when `orEqual`): in the group of `key`
    /// (when `key` is long enough to have one) or else the greatest row of an earlier group.
    private mutating func overSeekBelow(_ key: [UInt8], orEqual: Bool) throws -> ([UInt8], [UInt8])? {
        let own = Array(key.prefix(SplitTable.inlineBytes))
        if own.count == SplitTable.inlineBytes && bytesStart(own, with: groupPrefix) {
            try load(own)
            let i = lowerBound(key, strictly: orEqual) - 1
            if i >= 0 { gi = i; return rows[i] }
        }
        return try lastRow(before: own)
    }

    /// The greatest row (in `prefix`) of the groups before `g`.
    private mutating func lastRow(before g: [UInt8]) throws -> ([UInt8], [UInt8])? {
        var bound = g
        while let (ok, _) = try over!.seekLastLT(bound), bytesStart(ok, with: groupPrefix) {
            let pg = groupOf(ok)
            try load(pg)
            if let last = rows.last { gi = rows.count - 1; return last }
            bound = pg
        }
        return nil
    }

    private mutating func overPrev() throws -> ([UInt8], [UInt8])? {
        guard let g = group else { return nil }
        if gi > 0 { gi -= 1; return rows[gi] }
        return try lastRow(before: g)
    }
}
