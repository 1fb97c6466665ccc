import EmberCore

/// A small object kept whole in ONE tree record (tag 4) at its own key: its priority, its leaf
/// children with their priorities, and its version. The same object stored per leaf (the format
/// before, still read and written when an object does not qualify) costs a record per leaf, each
/// keyed by the full path, plus a version row: for the typical child of a collection
/// (`{"score": 1, "name": "n"}`) ~3× the bytes.
///
/// Invariant: no other tree record has the inline record's key as a prefix (its subtree is the
/// record), and its key and its children's keys fit `tree` itself (never its overflow twin).
/// Every tree read understands it; a write inside or below it first replaces it with the per-leaf
/// records and version row it stands for (`Applier.explode`), so versions are exactly those of the
/// format before. Replicas and snapshots see the per-leaf form (`records(at:)`): the state hash
/// and snapshot streams do not depend on which form a node stores.
struct InlineObject {
    /// Limits of an inline object: a few leaves, a small record.
    static let maxChildren = 16
    static let maxEncodedBytes = 256
    static let tag: UInt8 = 4

    struct Child {
        var key: String
        var leaf: Leaf
        var priority: Priority?
    }

    /// The log index of the write that put the object (at = sub for its key).
    var version: UInt64
    var priority: Priority?
    /// In key order (= the byte order of their segment encodings).
    var children: [Child]

    var node: Node {
        var d: KeyMap<Node> = [:]
        d.reserveCapacity(children.count)
        for c in children { d[c.key] = Node(c.leaf, priority: c.priority) }
        return Node(children: d, priority: priority)
    }

    func child(_ key: String) -> Child? { children.first { $0.key.isExactly(key) } }

    /// The record for `node` written at `key` by the write with log index `version`, or nil when it
    /// does not qualify (not a non-empty object of leaves within the limits, or keys too long).
    static func record(for node: Node, key: [UInt8], version: UInt64) -> [UInt8]? {
        guard node.leaf == nil, !node.children.isEmpty, node.children.count <= maxChildren else { return nil }
        // The record's exact size first, without allocating: a bulk write asks this of every
        // object it puts, and building a record only to drop it as too large (a post with a long
        // body: a third of an export's leaf objects) was most of the writer thread's record cost
        // in an import (issue 42; a lower bound refused only part of them before).
        guard let size = encodedSize(node, version: version), size <= maxEncodedBytes else { return nil }
        // Every child is a leaf (`encodedSize` said so). Encoded straight from the node's
        // children in key order, without an `InlineObject` and its copied `Child` list (a
        // visible share of a bulk write's records): the same bytes as `encoded`.
        var segments: [UInt8] = []
        let kids = KeyOrdered.children(node.children, segments: &segments)
        // Exploded, every child's key must still fit `tree` (see the invariant).
        for kid in kids where key.count + kid.segment.count > SplitTable.inlineBytes { return nil }
        var w = ByteWriter(capacity: size)
        writeHeader(&w, version: version, priority: node.priority, count: kids.count)
        for kid in kids {
            let (k, child) = node.children[kid.at]
            w.string(k)
            w.compactLeaf(child.leaf!, child.priority)
        }
        assert(w.bytes.count == size, "an inline record's size differs from its encoding")
        return w.bytes
    }

    /// The record's fields before its children (shared by `record(for:)` and `encoded`).
    static func writeHeader(_ w: inout ByteWriter, version: UInt64, priority: Priority?, count: Int) {
        w.u8(tag)
        w.uvarint(version)
        w.priority(priority)
        w.varint(count)
    }

    /// The size of `node`'s record written by the write with log index `version` (what
    /// `encoded` gives for it), or nil when a child is no leaf or it passes `maxEncodedBytes`
    /// (counting stops there).
    static func encodedSize(_ node: Node, version: UInt64) -> Int? {
        var n = 1 + LogEntry.varintSize(version) + prioritySize(node.priority) + LogEntry.varintSize(node.children.count)
        for (k, c) in node.children {
            guard let l = c.leaf else { return nil }
            n += childSize(keyBytes: k.utf8.count, l.bytes, c.priority)
            if n > maxEncodedBytes { return nil }
        }
        return n
    }

    /// Bytes of `ByteWriter.priority(p)`.
    static func prioritySize(_ p: Priority?) -> Int {
        switch p {
        case nil: return 1
        case .number?: return 9
        case .string(let s)?: return 1 + LogEntry.stringSize(s)
        }
    }

    var encoded: [UInt8] {
        var w = ByteWriter(capacity: Self.maxEncodedBytes)
        Self.writeHeader(&w, version: version, priority: priority, count: children.count)
        for c in children {
            w.string(c.key)
            w.compactLeaf(c.leaf, c.priority)
        }
        return w.bytes
    }

    static func decode(_ b: [UInt8]) throws(StorageError) -> InlineObject {
        var r = ByteReader(b)
        guard try r.u8() == tag else { throw .corrupt("not an inline object record") }
        let version = try r.uvarint()
        let p = try r.priority()
        let n = try r.varint()
        guard n >= 1, n <= maxChildren else { throw .corrupt("inline object of \(n) children") }
        var kids: [Child] = []
        kids.reserveCapacity(n)
        for _ in 0..<n {
            let k = try r.string()
            let (l, lp) = try r.compactLeaf()
            kids.append(Child(key: k, leaf: l, priority: lp))
        }
        guard r.atEnd else { throw .corrupt("inline object trailing bytes") }
        return InlineObject(version: version, priority: p, children: kids)
    }

    /// The version a record keeps without decoding its children.
    static func version(_ b: [UInt8]) throws(StorageError) -> UInt64 {
        var r = ByteReader(b, at: 1)
        return try r.uvarint()
    }

    /// The per-leaf records the object stands for (the format before), in key order: the
    /// object's priority record at `key` (when it has one), then one leaf record per child.
    func records(at key: [UInt8]) -> [([UInt8], [UInt8])] {
        var out: [([UInt8], [UInt8])] = []
        out.reserveCapacity(children.count + 1)
        if let p = priority { out.append((key, TreeRecord.priority(p).encoded)) }
        for c in children {
            var k = key
            KeyCodec.appendSegment(c.key, to: &k)
            out.append((k, TreeRecord.leaf(c.leaf, c.priority).encoded))
        }
        return out
    }

    /// The version row the object stands for: an object written at its own path has at = sub =
    /// its write's index. (An object written inside a larger write had no row; its ancestor's `at`
    /// is the same index, so the row changes no version.)
    var versionRow: [UInt8] {
        var w = ByteWriter()
        w.u64(version); w.u64(version)
        return w.bytes
    }
}

extension ByteWriter {
    /// Unsigned LEB128 of any u64.
    mutating func uvarint(_ v: UInt64) {
        var x = v
        while x >= 0x80 { bytes.append(UInt8(x & 0x7F) | 0x80); x >>= 7 }
        bytes.append(UInt8(x))
    }
}

extension ByteReader {
    mutating func uvarint() throws(StorageError) -> UInt64 {
        var x: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try u8()
            guard shift < 64, shift < 63 || b <= 1 else { throw .corrupt("uvarint") }
            x |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return x }
            shift += 7
        }
    }

    mutating func compactLeaf() throws(StorageError) -> (Leaf, Priority?) {
        let t = try u8()
        let l: Leaf
        switch t & 0x0F {
        case 1: l = .bool(false)
        case 2: l = .bool(true)
        case 3:
            let z = try uvarint()
            l = .int(Int64(bitPattern: (z >> 1) ^ (0 &- (z & 1))))
        case 4: l = .double(try f64())
        case 5: l = .string(try string())
        default: throw .corrupt("inline leaf tag \(t)")
        }
        switch t & 0xF0 {
        case 0: return (l, nil)
        case 0x10: return (l, .number(try f64()))
        case 0x20: return (l, .string(try string()))
        default: throw .corrupt("inline leaf priority tag \(t)")
        }
    }
}
