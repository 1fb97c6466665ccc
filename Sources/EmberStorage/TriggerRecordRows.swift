import CLMDB
import EmberCore
import Foundation

/// Where the trigger groups' shared change records live (storage format 7): the table
/// `trigrec`, keyed by log index first, `index (8) ‖ group (8) ‖ namespace`. Every member
/// writes a matching entry's records at the table's end (MDB_APPEND: full pages; in `meta`,
/// keyed by group first, every record was a middle insert and pages split in half), and the
/// cursors' passing deletes them from the left. A reader of one group skips the others' rows.
///
/// Each group's head, in `meta` at `triggers/h/` + `group (8) ‖ namespace`, holds the stream's
/// newest position (its last record's counts, rewritten in place with each record: the
/// index-first order no longer finds a group's last record by one seek) and how far its pruning
/// has walked. In `meta`, whose page every transaction rewrites anyway (the applied index), not
/// at the table's start: a head there dirtied a second leaf and its branches per transaction.
/// Heads are local: a snapshot carries the records in format 6's `meta` layout
/// (`TriggerChangeLog.recordsPrefix`, the peer protocol unchanged) and no head; the installer
/// rebuilds them from the records (`rebuildHeads`).
enum TriggerRecordRows {
    static let tableName = "trigrec"

    /// What follows the index in a record's key: `group (8) ‖ namespace`.
    static func stream(_ ns: String, _ group: UInt64) -> [UInt8] {
        var w = ByteWriter(capacity: 8 + ns.utf8.count)
        w.u64(group)
        w.bytes.append(contentsOf: ns.utf8)
        return w.bytes
    }

    static func key(_ index: UInt64, _ stream: [UInt8]) -> [UInt8] {
        var w = ByteWriter(capacity: 8 + stream.count)
        w.u64(index)
        w.bytes.append(contentsOf: stream)
        return w.bytes
    }

    /// Where the records start (log indexes start at 1).
    static let firstRecord = key(1, [])

    static let headPrefix = TriggerKeys.prefix + Array("h/".utf8)

    static func headKey(_ stream: [UInt8]) -> [UInt8] { headPrefix + stream }

    static func index<K: Collection<UInt8>>(of k: K) -> UInt64 {
        k.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }

    /// Whether the key `k` is `stream`'s (a record's or the head).
    static func isStream(_ k: UnsafeRawBufferPointer, _ stream: [UInt8]) -> Bool {
        k.count == 8 + stream.count && stream.withUnsafeBytes { s in memcmp(k.baseAddress! + 8, s.baseAddress!, s.count) == 0 }
    }

    static func isStream(_ k: [UInt8], _ stream: [UInt8]) -> Bool {
        k.count == 8 + stream.count && k[8...].elementsEqual(stream)
    }

    /// The namespace and group of a key's stream.
    static func namespaceAndGroup(_ k: [UInt8]) -> (ns: String, group: UInt64) {
        (String(decoding: k[16...], as: UTF8.self), index(of: k[8..<16]))
    }

    // MARK: - Heads

    struct Head: Equatable {
        /// The stream's newest record's position (its counts go on from it).
        var last = TriggerChangeLog.Position()
        /// Every record of the stream at or before it that no trigger holds is gone (`refresh`
        /// starts after it): the least hold's start when it last walked.
        var prunedThrough: UInt64 = 0
    }

    static let headBytes = 1 + 5 * 8
    static let headFormat: UInt8 = 1

    static func head(_ tables: Tables, _ t: Txn, _ stream: [UInt8]) throws -> Head? {
        guard let v = try t.get(tables.meta, headKey(stream)) else { return nil }
        var r = ByteReader(v)
        guard try r.u8() == headFormat else { throw StorageError.corrupt("trigger stream head format") }
        let last = TriggerChangeLog.Position(index: try r.u64(), records: try r.u64(), bytes: try r.u64(), events: try r.u64())
        return Head(last: last, prunedThrough: try r.u64())
    }

    static func putHead(_ tables: Tables, _ t: Txn, _ stream: [UInt8], _ h: Head) throws {
        var w = ByteWriter(capacity: headBytes)
        w.u8(headFormat)
        for v in [h.last.index, h.last.records, h.last.bytes, h.last.events, h.prunedThrough] { w.u64(v) }
        try t.put(tables.meta, headKey(stream), w.bytes)
    }

    /// Puts the record `value` at `index` and moves the head to `at` (the same size: rewritten
    /// in place). `prunedThrough` is the head's as read (the writer read it for `last`).
    static func put(_ tables: Tables, _ t: Txn, _ stream: [UInt8], index: UInt64, _ value: [UInt8],
                    at: TriggerChangeLog.Position, prunedThrough: UInt64) throws {
        try t.putOrdered(tables.trigrec, key(index, stream), value)
        try putHead(tables, t, stream, Head(last: at, prunedThrough: prunedThrough))
    }

    /// Every stream's head anew from its records (after a snapshot's records were put):
    /// nothing pruned known.
    static func rebuildHeads(_ tables: Tables, _ t: Txn) throws {
        var heads: [[UInt8]: TriggerChangeLog.Position] = [:]
        try t.scan(tables.trigrec, prefix: [], startingAt: firstRecord) { k, v in
            heads[Array(k[8...])] = try TriggerChangeLog.position(index(of: k), v)
            return true
        }
        for (stream, last) in heads { try putHead(tables, t, stream, Head(last: last)) }
    }

    // MARK: - Format 6's layout

    /// Moves the records of a format-6 directory (`meta`, `triggers/r/<ns>\0<group><index>`)
    /// into the table, heads made from them; returns how many moved. Deterministic: every
    /// member of one state moves the same rows. Nothing to do once done.
    @discardableResult
    static func migrate(_ tables: Tables, _ t: Txn) throws -> Int {
        var moved: [([UInt8], [UInt8])] = []
        try t.scan(tables.meta, prefix: TriggerChangeLog.recordRows) { k, v in
            if TriggerChangeLog.isRecordRow(k) { moved.append((k, v)) }
            return true
        }
        guard !moved.isEmpty else { return 0 }
        for (k, v) in moved {
            let (ns, group, index) = TriggerChangeLog.legacyRow(k)
            try t.put(tables.trigrec, key(index, stream(ns, group)), v)
        }
        try t.deletePrefix(tables.meta, TriggerChangeLog.recordRows)
        try rebuildHeads(tables, t)
        return moved.count
    }

    /// `put` each record in format 6's `meta` layout (what a snapshot carries; `full` makes
    /// a compact one full).
    static func legacyRows(_ tables: Tables, _ t: Txn, full: ([UInt8], UInt64, [UInt8]) throws -> [UInt8],
                           put: ([UInt8], [UInt8]) throws -> Void) throws {
        try t.scan(tables.trigrec, prefix: [], startingAt: firstRecord) { k, v in
            let (ns, group) = namespaceAndGroup(k)
            let i = index(of: k)
            try put(TriggerKeys.row(TriggerChangeLog.recordsPrefix(ns, group), i), try full(k, i, v))
            return true
        }
    }
}
