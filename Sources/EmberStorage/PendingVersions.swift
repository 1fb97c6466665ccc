import EmberCore

/// A tree key encoded once per write, with the end of each ancestor's key in it: ancestors'
/// keys (for their versions, pruning and leaf checks) are prefixes, not re-encoded paths.
struct EncodedPath {
    let bytes: [UInt8]
    /// `ends[k]`: the length of the key of the ancestor with `k` segments (`ends[0]`: the
    /// namespace prefix, i.e. the root; `ends.last`: the whole key).
    let ends: [Int]

    init(_ ns: String, _ path: Path) {
        var b = KeyCodec.namespacePrefix(ns)
        var e: [Int] = []
        e.reserveCapacity(path.count + 1)
        e.append(b.count)
        for s in path.segments {
            KeyCodec.appendSegment(s, to: &b)
            e.append(b.count)
        }
        bytes = b
        ends = e
    }

    init(bytes: [UInt8], ends: [Int]) {
        assert(ends.last == bytes.count, "the last end is the whole key")
        self.bytes = bytes
        self.ends = ends
    }

    func ancestor(_ level: Int) -> [UInt8] { Array(bytes[0..<ends[level]]) }
}

/// Ancestors' `sub` versions raised by the writes of one flat transaction (`Writer.ApplyMode`).
/// Every write raises `sub` of all its ancestors; in a batch these are mostly the same few
/// records (a collection and its parents), so they are written once, when the transaction ends
/// (`flush`), instead of being read and rewritten by each write. Reads inside the transaction
/// see them through `Applier.version`. Not used with nested transactions: an entry rolled back
/// there would leave its raises behind.
final class PendingVersions {
    /// A key hashed as one run of bytes (`[UInt8]`'s own hashing feeds the hasher byte by byte,
    /// which dominated this table's cost).
    struct Key: Hashable {
        let bytes: [UInt8]
        func hash(into h: inout Hasher) { bytes.withUnsafeBytes { h.combine(bytes: $0) } }
    }

    private(set) var sub: [Key: UInt64] = [:]
    var isEmpty: Bool { sub.isEmpty }

    func sub(of key: [UInt8]) -> UInt64? { sub[Key(bytes: key)] }

    /// Entries apply in index order, so the latest raise is the largest.
    func raise(_ key: [UInt8], to index: UInt64) {
        let k = Key(bytes: key)
        assert((sub[k] ?? 0) <= index, "versions only grow within a transaction")
        sub[k] = index
    }

    /// A write at `key` put its own record (its index, the newest) and deleted every record below
    /// it, so pending raises at or below `key` are void. Anything pending below `key` is an
    /// ancestor of an earlier write, which makes `key` one too: unless `key` is pending, there is
    /// nothing to drop (the common case costs one lookup).
    func wroteAt(_ key: [UInt8]) {
        guard sub[Key(bytes: key)] != nil else { return }
        sub = sub.filter { !bytesStart($0.key.bytes, with: key) }
    }

    /// Writes the raised versions (keeping each record's `at`), in key order.
    func flush(_ tables: Tables, _ t: Txn) throws {
        for key in sub.keys.sorted(by: { bytesLess($0.bytes, $1.bytes) }) {
            let r = try tables.versionRecord(t, key.bytes)
            try tables.putVersion(t, key.bytes, sub: max(r.sub, sub[key]!), at: r.at)
        }
        sub.removeAll(keepingCapacity: true)
    }
}
