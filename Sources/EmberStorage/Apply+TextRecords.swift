import EmberCore

/// A text update's parts written straight from their text (issue 42): each part over nothing is
/// read into a `TextTree` and its tree records go from there in key order, with no `Node` built
/// (building the nodes, writing from them and freeing them was over a quarter of a follower's
/// samples in an import). The records, versions and answers are those of `write` with the node
/// `Node(jsonText:)` builds (`TextRecordsTests`).
extension Applier {
    /// Whether an update's parts may be read from their text (`writeText`): nothing asks for
    /// their nodes. No index in the namespace (index rows are the values'), no trigger (its
    /// records hold them), no rule that reads them (`grantedWithoutValues`). The answer and the
    /// listeners' changes are built from the text when read (`TextPatch`).
    mutating func textWritable(_ e: LogEntry, base: Path, parts: [Path]) throws -> Bool {
        guard tables.textRecords, !replaying else { return false }
        if let set = triggers[e.namespace], !set.isEmpty { return false }
        guard try defs(e.namespace).isEmpty else { return false }
        return grantedWithoutValues(e, base: base, paths: parts.map { base.appending($0) }, isUpdate: true)
    }

    /// `write` of a part over nothing (its old value empty, read in this transaction) whose
    /// value is `root` in `tree` (nil: empty), in a namespace without indexes: the same records
    /// and versions. Returns whether anything changed.
    mutating func writeText(path: Path, key encoded: EncodedPath, tree: TextTree, root: Int32?, index: UInt64) throws -> Bool {
        guard let root else { return false }  // nothing over nothing
        let key = encoded.bytes
        let item = tree.items[Int(root)]
        let leafAncestor = path.isRoot ? nil : try leafAncestor(of: encoded, probed: nil)
        let inline = tables.inlineObjects && !path.isRoot && item.kind == .object
            ? TextRecords.inline(tree, item, key: key, version: index) : nil
        let ownVersion = (item.kind != .object && !path.isRoot) || inline != nil
        if let leafAncestor { try becomeObject(leafAncestor, index: index) }
        if let record = ownVersion ? inline ?? TextRecords.leaf(tree, item, version: index) : nil {
            if rows != nil { try t.putOrdered(tables.treeS, key, record) } else { try t.put(tables.treeS, key, record) }
        } else {
            var k = key
            var appending = true
            try putTextRecords(tree, item, key: &k, version: index, ordered: rows != nil && tables.orderedRecords, appending: &appending)
        }
        try writeVersions(path: path, key: encoded, ownVersion: ownVersion, index: index, parent: nil)
        return true
    }

    /// `putRecords` of `item`: its children are in key order already.
    private func putTextRecords(_ tree: TextTree, _ item: TextTree.Item, key: inout [UInt8], version: UInt64,
                                ordered inOrder: Bool, appending: inout Bool) throws {
        let ordered = inOrder || Int(item.count) >= Self.bulkParts
        func put(_ record: [UInt8]) throws {
            if ordered && appending { appending = try t.putOrdered(tables.treeS, key, record) } else { try t.put(tables.treeS, key, record) }
        }
        guard item.kind == .object else {  // the root's value
            try put(TextRecords.leaf(tree, item, version: nil))
            return
        }
        if let p = tree.priority(item) { try put(TreeRecord.priority(p).encoded) }
        let n = key.count
        for c in tree.children(item) {
            let child = tree.items[Int(c)]
            key.append(contentsOf: tree.segment(child))
            if child.kind != .object {
                try put(TextRecords.leaf(tree, child, version: nil))
            } else if tables.inlineObjects, let record = TextRecords.inline(tree, child, key: key, version: version) {
                try put(record)
            } else {
                try putTextRecords(tree, child, key: &key, version: version, ordered: ordered, appending: &appending)
            }
            key.removeSubrange(n...)
        }
    }
}

/// The record encodings of `TreeRecord` and `InlineObject` for a `TextTree`'s items: the same
/// bytes as those of the node the item stands for.
enum TextRecords {
    /// `TreeRecord.leaf(l, p).encoded`, or with `version` `TreeRecord.leaf(l, p, version:)`.
    static func leaf(_ tree: TextTree, _ item: TextTree.Item, version: UInt64?) -> [UInt8] {
        let p = tree.priority(item)
        var w = ByteWriter(capacity: 1 + 10 + Int(item.count) + TreeRecord.sizeEstimate(p) + 8)
        w.u8(version == nil ? 1 : 3)
        w.leaf(tree.leafBytes(item))
        w.priority(p)
        if let version { w.u64(version) }
        return w.bytes
    }

    /// `InlineObject.record(for:key:version:)` of `item`, or nil where that is nil.
    static func inline(_ tree: TextTree, _ item: TextTree.Item, key: [UInt8], version: UInt64) -> [UInt8]? {
        guard item.kind == .object, item.count >= 1, item.count <= InlineObject.maxChildren else { return nil }
        let kids = tree.children(item)
        let p = tree.priority(item)
        var size = 1 + LogEntry.varintSize(version) + InlineObject.prioritySize(p) + LogEntry.varintSize(kids.count)
        for c in kids {
            let child = tree.items[Int(c)]
            guard child.kind != .object else { return nil }
            size += InlineObject.childSize(keyBytes: keyCount(tree.segment(child)), tree.leafBytes(child), tree.priority(child))
            if size > InlineObject.maxEncodedBytes { return nil }
        }
        // Exploded, every child's key must still fit `tree` (`InlineObject`'s invariant).
        for c in kids where key.count + Int(tree.items[Int(c)].segmentCount) > SplitTable.inlineBytes { return nil }
        var w = ByteWriter(capacity: size)
        InlineObject.writeHeader(&w, version: version, priority: p, count: kids.count)
        for c in kids {
            let child = tree.items[Int(c)]
            let segment = tree.segment(child)
            w.varint(keyCount(segment))
            appendKey(segment, to: &w.bytes)
            w.compactLeaf(tree.leafBytes(child), tree.priority(child))
        }
        assert(w.bytes.count == size, "an inline record's size differs from its encoding")
        return w.bytes
    }

    /// The UTF-8 bytes of the key whose segment (`KeyCodec.appendSegment`) is `segment`.
    static func keyCount(_ segment: ArraySlice<UInt8>) -> Int {
        segment.first == 0x01 ? segment.count - 8 : segment.count - 2
    }

    /// The key's UTF-8 read back from its segment: an integer key's follows its 7-byte head, a
    /// text key's is its text-order bytes mapped back.
    static func appendKey(_ segment: ArraySlice<UInt8>, to out: inout [UInt8]) {
        let s = segment.startIndex
        if segment.first == 0x01 {
            out.append(contentsOf: segment[(s + 7)..<(segment.endIndex - 1)])
        } else {
            for b in segment[(s + 1)..<(segment.endIndex - 1)] { out.append(KeyOrder.textByte(fromOrderByte: b)) }
        }
    }
}
