import EmberCore
import Foundation

/// A tree key encoded once per write, with the end of each ancestor's key in it: ancestors'
/// keys (for their versions, pruning and leaf checks) are prefixes, not re-encoded paths.
struct EncodedPath {
    let bytes: [UInt8]
    /// `ends[k]`: the length of the key of the ancestor with `k` segments (`ends[0]`: the
    /// namespace prefix, i.e. the root; `ends.last`: the whole key).
    let ends: [Int]

    init(_ ns: String, _ path: Path) {
        // Room for the whole key up front (a segment takes at most its UTF-8 + 8 bytes,
        // `KeyOrder.appendSortKey`): built byte by byte, it regrew several times per write.
        var size = ns.utf8.count + 1
        for s in path.segments { size += s.utf8.count + 8 }
        var b: [UInt8] = []
        b.reserveCapacity(size)
        b.append(contentsOf: ns.utf8)
        b.append(0)  // `KeyCodec.namespacePrefix`
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

    /// `ancestor(level)` without a copy: a slice of `bytes`.
    func ancestorSlice(_ level: Int) -> ArraySlice<UInt8> { bytes[0..<ends[level]] }
}

/// Ancestors' `sub` versions raised by the writes of one flat transaction (`Writer.ApplyMode`).
/// Every write raises `sub` of all its ancestors; in a batch these are mostly the same few
/// records (a collection and its parents), so they are written once, when the transaction ends
/// (`flush`), instead of being read and rewritten by each write. Reads inside the transaction
/// see them through `Applier.version`. Not used with nested transactions: an entry rolled back
/// there would leave its raises behind.
final class PendingVersions {
    /// A key hashed as one run of bytes (`[UInt8]`'s own hashing feeds the hasher byte by byte,
    /// which dominated this table's cost). A slice of the write's key (`EncodedPath.ancestorSlice`):
    /// an ancestor's key is looked up and kept without being copied out (a copy per write and
    /// level that missed the chain, e.g. every write of a replay spreading over many parents).
    struct Key: Hashable {
        let bytes: ArraySlice<UInt8>
        func hash(into h: inout Hasher) { bytes.withUnsafeBytes { h.combine(bytes: $0) } }
        static func == (a: Key, b: Key) -> Bool {
            a.bytes.count == b.bytes.count && a.bytes.withUnsafeBytes { x in
                b.bytes.withUnsafeBytes { y in x.isEmpty || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0 }
            }
        }
    }

    /// One pending raise, shared by the table and `chain`, so a raise through the chain changes
    /// the table's value without a lookup.
    final class Slot {
        var sub: UInt64
        init(_ sub: UInt64) { self.sub = sub }
    }

    private(set) var sub: [Key: Slot] = [:]
    var isEmpty: Bool { sub.isEmpty }
    /// Bumped whenever slots leave the table (`wroteAt` dropping some, `flush`): slots kept
    /// outside it (`ReplayCursors.Parent.chain`) are stale once it moved.
    private(set) var generation: UInt64 = 0
    /// The most levels one `raiseAncestors` raised since the table was last empty: every slot
    /// has fewer segments, so a key with this many or more is no slot (`wroteAt`'s filter).
    private var maxLevels = 0

    /// The ancestors' slots of the last `raiseAncestors` (by level) and that write's key: the
    /// next write mostly shares its upper ancestors (a collection and its parents), whose slots
    /// it raises without building, hashing and looking up their keys. Cleared whenever slots
    /// leave the table.
    private var chain: [Slot] = []
    private var chainKey: EncodedPath?

    func sub(of key: [UInt8]) -> UInt64? { sub[Key(bytes: key[...])]?.sub }

    /// `key`'s slot, raised to `index` (entries apply in index order: the latest raise is the largest).
    private func slot(_ key: ArraySlice<UInt8>, raisedTo index: UInt64) -> Slot {
        let k = Key(bytes: key)
        if let s = sub[k] {
            assert(s.sub <= index, "versions only grow within a transaction")
            s.sub = index
            return s
        }
        let s = Slot(index)
        sub[k] = s
        return s
    }

    /// Raises the `levels` first ancestors of `key` (level 0: the namespace root) to `index`:
    /// `raise` of each, with the levels it shares with the previous call's key raised in place.
    func raiseAncestors(of key: EncodedPath, levels: Int, to index: UInt64) {
        maxLevels = max(maxLevels, levels)
        var level = 0
        if let last = chainKey {
            // Ancestors at a level are equal when their ends are and the keys agree up to it.
            let same = commonPrefix(last.bytes, key.bytes)
            while level < levels, level < chain.count, last.ends[level] == key.ends[level], key.ends[level] <= same {
                assert(chain[level].sub <= index, "versions only grow within a transaction")
                chain[level].sub = index
                level += 1
            }
        }
        chain.removeSubrange(level...)
        while level < levels {
            chain.append(slot(key.ancestorSlice(level), raisedTo: index))
            level += 1
        }
        chainKey = key
    }

    /// The slots the last `raiseAncestors` raised, by level: what a caller keeps to raise the
    /// same ancestors again (`raise(_:to:)`) while `generation` stays.
    var lastChain: [Slot] { chain }

    /// Raises `slots` (taken from `lastChain` at the current `generation`) to `index`: what
    /// `raiseAncestors` does for a key with the same ancestors, without finding their slots.
    func raise(_ slots: [Slot], to index: UInt64) {
        for s in slots {
            assert(s.sub <= index, "versions only grow within a transaction")
            s.sub = index
        }
    }

    /// A write at `key` put its own record (its index, the newest) and deleted every record below
    /// it, so pending raises at or below `key` are void. Anything pending below `key` is an
    /// ancestor of an earlier write, which makes `key` one too: unless `key` is pending, there is
    /// nothing to drop (the common case costs one lookup, none when `key` (of `depth` segments)
    /// is at least as deep as every write so far: a replayed window's writes).
    func wroteAt(_ key: [UInt8], depth: Int) {
        guard depth < maxLevels, sub[Key(bytes: key[...])] != nil else { return }
        sub = sub.filter { !$0.key.bytes.starts(with: key) }
        generation &+= 1
        forgetChain()
    }

    /// Writes the raised versions (keeping each record's `at`), in key order.
    func flush(_ tables: Tables, _ t: Txn) throws {
        for (key, slot) in sub.map({ (Array($0.key.bytes), $0.value) }).sorted(by: { bytesLess($0.0, $1.0) }) {
            let r = try tables.versionRecord(t, key)
            try tables.putVersion(t, key, sub: max(r.sub, slot.sub), at: r.at)
        }
        sub.removeAll(keepingCapacity: true)
        maxLevels = 0
        generation &+= 1
        forgetChain()
    }

    private func forgetChain() {
        chain.removeAll(keepingCapacity: true)
        chainKey = nil
    }

    /// The length of the longest common prefix of `a` and `b`.
    private func commonPrefix(_ a: [UInt8], _ b: [UInt8]) -> Int {
        let n = min(a.count, b.count)
        return a.withUnsafeBufferPointer { x in
            b.withUnsafeBufferPointer { y in
                var i = 0
                while i < n && x[i] == y[i] { i += 1 }
                return i
            }
        }
    }
}
