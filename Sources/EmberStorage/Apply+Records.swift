import EmberCore
import Foundation

/// The tree records of an object written whole (`Applier.write`): its leaves, its small
/// leaf-only descendants as inline objects, the priority records of the objects between; the
/// steps every write takes around them (a leaf above made an object, the versions).
extension Applier {
    /// Puts the records of `node` (an object) at `key`, written by the write with log index
    /// `version`: its small leaf-only descendants as inline objects carrying that version (which
    /// changes no version: the write's own `at` above them is the same index).
    ///
    /// In a bulk write (`rows`) every record goes in key order, with MDB_APPEND while they land
    /// past the table's end (issue 42): an import's parts (a user: its leaves, its inline
    /// children, its posts' records) put plainly in their maps' order filled pages about half
    /// full, as a plain put at the table's end splits its last page in half, and every page is
    /// allocated, copied and written out at the commit.
    func putRecords(_ node: Node, key: inout [UInt8], version: UInt64) throws {
        var appending = true
        try putRecords(node, key: &key, version: version, ordered: rows != nil && tables.orderedRecords, appending: &appending)
    }

    /// `ordered`: the children in key order, every record put with MDB_APPEND while `appending`
    /// (cleared by the first record that is not past the table's end: from there on, plain puts,
    /// as each failed append costs a walk to the table's end). Many children (`bulkParts`) are
    /// always put in key order: their records land next to each other.
    private func putRecords(_ node: Node, key: inout [UInt8], version: UInt64, ordered inOrder: Bool, appending: inout Bool) throws {
        let ordered = inOrder || node.children.count >= Self.bulkParts
        func put(_ record: [UInt8]) throws {
            if ordered && appending { appending = try t.putOrdered(tables.treeS, key, record) } else { try t.put(tables.treeS, key, record) }
        }
        if let leaf = node.leaf {  // the root's value
            try put(TreeRecord.leaf(leaf, node.priority).encoded)
            return
        }
        if let p = node.priority { try put(TreeRecord.priority(p).encoded) }
        // `key` extended by the child's segment.
        func putChild(_ child: Node) throws {
            if let leaf = child.leaf {
                try put(TreeRecord.leaf(leaf, child.priority).encoded)
            } else if tables.inlineObjects, let record = InlineObject.record(for: child, key: key, version: version) {
                try put(record)
            } else {
                try putRecords(child, key: &key, version: version, ordered: ordered, appending: &appending)
            }
        }
        let n = key.count
        if !ordered {
            // Straight from the map (no copied array of them).
            for (k, child) in node.children {
                KeyCodec.appendSegment(k, to: &key)
                try putChild(child)
                key.removeSubrange(n...)
            }
            return
        }
        var segments: [UInt8] = []
        for (at, segment) in KeyOrdered.children(node.children, segments: &segments) {
            key.append(contentsOf: segments[segment])
            try putChild(node.children[at].value)
            key.removeSubrange(n...)
        }
    }

    /// The leaf above `encoded` (at most one) a write of data there turns into an object, its
    /// inline object stored per leaf first when it is one's (`probed`: as `write`'s).
    func leafAncestor(of encoded: EncodedPath, probed: WriteProbe?) throws -> (key: [UInt8], record: [UInt8])? {
        var found: (key: [UInt8], record: [UInt8])?
        if let probed { found = probed.leafAbove } else { found = try tables.leafOnPath(t, encoded, includingSelf: false) }
        // An inline object above: stored per leaf first; then a leaf of it may be the ancestor.
        if let (k, record) = found, record.first == InlineObject.tag {
            try explode(k, record)
            found = try tables.leafOnPath(t, encoded, includingSelf: false)
        }
        return found
    }

    /// The leaf `leafAncestor` found, made an object that keeps its priority.
    func becomeObject(_ leaf: (key: [UInt8], record: [UInt8]), index: UInt64) throws {
        let (k, record) = leaf
        guard case .leaf(_, let p) = try TreeRecord.decode(record) else { preconditionFailure("leafOnPath returned a non-leaf") }
        if let p { try t.put(tables.treeS, k, TreeRecord.priority(p).encoded) } else { try t.delete(tables.treeS, k) }
        // Its version leaves with the record: keep it as the node's `at` (sub: this write, below it).
        if let at = try TreeRecord.version(record) { try tables.putVersion(t, k, sub: index, at: at) }
    }

    /// A write's versions once its records are in (`write`'s parameters).
    func writeVersions(path: Path, key encoded: EncodedPath, ownVersion: Bool, index: UInt64, parent: ReplayCursors.Parent?) throws {
        let key = encoded.bytes
        // Versions: at[path] = sub[path] = index, sub of ancestors = index, descendants dropped
        // (dominated by at[path]). A leaf's own at/sub are in its record: its row goes too.
        try t.deletePrefix(tables.verS, key, excludingExact: !ownVersion, using: try replayCursors?.verCursor())
        if !ownVersion { try tables.putVersion(t, key, sub: index, at: index) }
        if let pending {
            pending.wroteAt(key, depth: path.count)
            // The replay: the parent's ancestors' slots, kept from its last write while no slot
            // left the table since (`PendingVersions.generation`).
            if let parent, parent.generation == pending.generation, parent.chain.count == path.count {
                pending.raise(parent.chain, to: index)
            } else {
                pending.raiseAncestors(of: encoded, levels: path.count, to: index)
                if let parent {
                    parent.chain = pending.lastChain
                    parent.generation = pending.generation
                }
            }
        } else {
            for level in 0..<path.count {
                let ak = encoded.ancestor(level)
                let r = try tables.versionRecord(t, ak)
                try tables.putVersion(t, ak, sub: index, at: r.at)
            }
        }
    }
}

/// An object's children in key order, sorted by their encoded segments (`KeyCodec`), all
/// encoded into one buffer: no array per child and no copied (key, node) pairs (sorting the
/// map's pairs with `KeyOrder.less` cost an import's writer more than the pages it saved).
enum KeyOrdered {
    /// Each child's position in `children` and its segment's span in `segments` (emptied first).
    static func children<V>(_ children: KeyMap<V>, segments: inout [UInt8]) -> [(at: KeyMap<V>.Index, segment: Range<Int>)] {
        segments.removeAll(keepingCapacity: true)
        var out: [(at: KeyMap<V>.Index, segment: Range<Int>)] = []
        out.reserveCapacity(children.count)
        let keys = children.keys
        var i = keys.startIndex
        while i != keys.endIndex {
            let start = segments.count
            KeyCodec.appendSegment(keys[i], to: &segments)
            out.append((i, start..<segments.count))
            i = keys.index(after: i)
        }
        if out.count < 2 { return out }
        segments.withUnsafeBytes { b in
            let base = b.baseAddress!
            func less(_ x: Range<Int>, _ y: Range<Int>) -> Bool {
                let c = memcmp(base + x.lowerBound, base + y.lowerBound, min(x.count, y.count))
                return c != 0 ? c < 0 : x.count < y.count
            }
            if out.count <= 16 {
                // Insertion sort: an object's few children.
                for j in 1..<out.count {
                    let e = out[j]
                    var k = j
                    while k > 0 && less(e.segment, out[k - 1].segment) {
                        out[k] = out[k - 1]
                        k -= 1
                    }
                    out[k] = e
                }
            } else {
                out.sort { less($0.segment, $1.segment) }
            }
        }
        return out
    }
}
