import EmberCore

/// One pending local write: an overwrite (`snap`) or a merge (`children`, relative paths).
struct WriteRecord {
    var writeId: Int
    var path: Path
    var snap: Node?
    var children: [(Path, Node)]?
    var visible: Bool

    /// Whether this write determines data at `path`.
    func contains(_ other: Path) -> Bool {
        if snap != nil { return path.contains(other) }
        for (rel, _) in children ?? [] where path.appending(rel).contains(other) { return true }
        return false
    }
}

/// The queue of pending local writes and the layered view of the visible ones (SDK `WriteTree`).
struct WriteTree {
    private(set) var visibleWrites = CompoundWrite.empty
    private(set) var allWrites: [WriteRecord] = []
    private var lastWriteId = -1

    mutating func addOverwrite(_ path: Path, _ snap: Node, writeId: Int, visible: Bool) {
        precondition(writeId > lastWriteId, "write ids must increase")
        allWrites.append(WriteRecord(writeId: writeId, path: path, snap: snap, children: nil, visible: visible))
        if visible { visibleWrites = visibleWrites.addingWrite(path, snap) }
        lastWriteId = writeId
    }

    mutating func addMerge(_ path: Path, _ children: [(Path, Node)], writeId: Int) {
        precondition(writeId > lastWriteId, "write ids must increase")
        allWrites.append(WriteRecord(writeId: writeId, path: path, snap: nil, children: children, visible: true))
        visibleWrites = visibleWrites.addingWrites(path, children)
        lastWriteId = writeId
    }

    func write(_ writeId: Int) -> WriteRecord? {
        allWrites.first { $0.writeId == writeId }
    }

    /// Removes a write (acked or reverted). Returns whether views must be re-evaluated: false when
    /// the write was invisible or fully shadowed by a later write.
    mutating func removeWrite(_ writeId: Int) -> Bool {
        guard let idx = allWrites.firstIndex(where: { $0.writeId == writeId }) else { return false }
        let removed = allWrites.remove(at: idx)
        var wasVisible = removed.visible
        var overlaps = false
        var i = allWrites.count - 1
        while wasVisible && i >= 0 {
            let current = allWrites[i]
            if current.visible {
                if i >= idx && current.contains(removed.path) {
                    wasVisible = false
                } else if removed.path.contains(current.path) {
                    overlaps = true
                }
            }
            i -= 1
        }
        if !wasVisible { return false }
        if overlaps {
            visibleWrites = WriteTree.layer(allWrites, at: .root) { $0.visible }
            lastWriteId = allWrites.last?.writeId ?? -1
        } else if removed.snap != nil {
            visibleWrites = visibleWrites.removingWrite(removed.path)
        } else {
            for (rel, _) in removed.children ?? [] {
                visibleWrites = visibleWrites.removingWrite(removed.path.appending(rel))
            }
        }
        return true
    }

    /// The writes passing `filter`, layered relative to `root`.
    static func layer(_ writes: [WriteRecord], at root: Path, _ filter: (WriteRecord) -> Bool) -> CompoundWrite {
        var result = CompoundWrite.empty
        for write in writes where filter(write) {
            if let snap = write.snap {
                if let rel = root.relative(write.path) {
                    result = result.addingWrite(rel, snap)
                } else if let rel = write.path.relative(root) {
                    result = result.addingWrite(.root, snap.descendant(rel))
                }
            } else if let children = write.children {
                if let rel = root.relative(write.path) {
                    result = result.addingWrites(rel, children)
                } else if let rel = write.path.relative(root) {
                    for (childPath, node) in children {
                        if let below = childPath.relative(rel) {
                            result = result.addingWrite(.root, node.descendant(below))
                        } else if let above = rel.relative(childPath) {
                            result = result.addingWrite(above, node)
                        }
                    }
                }
            }
        }
        return result
    }

    // MARK: - Event cache computations (absolute paths)

    func shadowingWrite(_ path: Path) -> Node? { visibleWrites.completeNode(path) }

    /// The complete local value at `treePath`: server data plus pending writes, or nil when unknown.
    func calcCompleteEventCache(_ treePath: Path, _ completeServerCache: Node?,
                                excluding writeIdsToExclude: Set<Int> = [], includeHiddenWrites: Bool = false) -> Node? {
        if writeIdsToExclude.isEmpty && !includeHiddenWrites {
            if let shadowing = visibleWrites.completeNode(treePath) { return shadowing }
            let subMerge = visibleWrites.childCompoundWrite(treePath)
            if subMerge.isEmpty { return completeServerCache }
            if completeServerCache == nil && !subMerge.hasCompleteWrite(.root) { return nil }
            return subMerge.apply(to: completeServerCache ?? .empty)
        }
        let merge = visibleWrites.childCompoundWrite(treePath)
        if !includeHiddenWrites && merge.isEmpty { return completeServerCache }
        if !includeHiddenWrites && completeServerCache == nil && !merge.hasCompleteWrite(.root) { return nil }
        let layered = WriteTree.layer(allWrites, at: treePath) { w in
            (w.visible || includeHiddenWrites) && !writeIdsToExclude.contains(w.writeId)
                && (w.path.contains(treePath) || treePath.contains(w.path))
        }
        return layered.apply(to: completeServerCache ?? .empty)
    }

    /// Whether pending writes (hidden ones when asked), minus `excluding`, fully determine `treePath`.
    func hasCompleteWrite(_ treePath: Path, excluding writeIdsToExclude: Set<Int>, includeHiddenWrites: Bool) -> Bool {
        WriteTree.layer(allWrites, at: treePath) { w in
            (w.visible || includeHiddenWrites) && !writeIdsToExclude.contains(w.writeId)
                && (w.path.contains(treePath) || treePath.contains(w.path))
        }.hasCompleteWrite(.root)
    }

    /// The children at `treePath` that are complete given server children and pending writes.
    func calcCompleteEventChildren(_ treePath: Path, _ completeServerChildren: Node?) -> Node {
        var result = Node.empty
        if let topLevelSet = visibleWrites.completeNode(treePath) {
            if !topLevelSet.isLeaf {
                for (k, v) in topLevelSet.children { result = result.updatingImmediateChild(k, v) }
            }
            return result
        }
        let merge = visibleWrites.childCompoundWrite(treePath)
        if let server = completeServerChildren {
            for (k, v) in server.children {
                let node = merge.childCompoundWrite(Path(validated: [k])).apply(to: v)
                result = result.updatingImmediateChild(k, node)
            }
        }
        for named in merge.completeChildren() {
            result = result.updatingImmediateChild(named.key, named.node)
        }
        return result
    }

    /// The new event data at `treePath/childPath` after a server overwrite there, or nil when a
    /// write shadows it.
    func calcEventCacheAfterServerOverwrite(_ treePath: Path, _ childPath: Path, existingServerSnap: Node) -> Node? {
        let path = treePath.appending(childPath)
        if visibleWrites.hasCompleteWrite(path) { return nil }
        let childMerge = visibleWrites.childCompoundWrite(path)
        if childMerge.isEmpty { return existingServerSnap.descendant(childPath) }
        return childMerge.apply(to: existingServerSnap.descendant(childPath))
    }

    /// A complete child of `treePath`, from writes or complete server data.
    func calcCompleteChild(_ treePath: Path, _ childKey: String, _ existingServerSnap: CacheNode) -> Node? {
        let path = treePath.child(childKey)
        if let shadowing = visibleWrites.completeNode(path) { return shadowing }
        guard existingServerSnap.isCompleteForChild(childKey) else { return nil }
        return visibleWrites.childCompoundWrite(path).apply(to: existingServerSnap.node.immediateChild(childKey))
    }

    /// Up to `count` children after (or before, when `reverse`) `startPost` in `index` order.
    func calcIndexedSlice(_ treePath: Path, _ completeServerData: Node?, startPost: NamedNode, count: Int,
                          reverse: Bool, index: QueryIndex) -> [NamedNode] {
        let merge = visibleWrites.childCompoundWrite(treePath)
        let toIterate: Node
        if let shadowing = merge.completeNode(.root) {
            toIterate = shadowing
        } else if let completeServerData {
            toIterate = merge.apply(to: completeServerData)
        } else {
            return []
        }
        guard !toIterate.isEmpty && !toIterate.isLeaf else { return [] }
        // Children strictly beyond `startPost` in iteration direction, nearest first.
        var beyond: [NamedNode] = []
        for (k, v) in toIterate.children {
            let child = NamedNode(key: k, node: v)
            let c = index.compare(child, startPost)
            if reverse ? c < 0 : c > 0 { beyond.append(child) }
        }
        let nearerFirst: (NamedNode, NamedNode) -> Bool = { a, b in
            let c = index.compare(a, b)
            return reverse ? c > 0 : c < 0
        }
        if count == 1 { return beyond.min(by: nearerFirst).map { [$0] } ?? [] }
        return Array(beyond.sorted(by: nearerFirst).prefix(count))
    }
}

/// A write tree seen from one location (SDK `WriteTreeRef`).
struct WriteTreeRef {
    let treePath: Path
    let writeTree: WriteTree

    func calcCompleteEventCache(_ completeServerCache: Node?) -> Node? {
        writeTree.calcCompleteEventCache(treePath, completeServerCache)
    }

    func calcCompleteEventChildren(_ completeServerChildren: Node?) -> Node {
        writeTree.calcCompleteEventChildren(treePath, completeServerChildren)
    }

    func calcEventCacheAfterServerOverwrite(_ path: Path, existingServerSnap: Node) -> Node? {
        writeTree.calcEventCacheAfterServerOverwrite(treePath, path, existingServerSnap: existingServerSnap)
    }

    func shadowingWrite(_ path: Path) -> Node? { writeTree.shadowingWrite(treePath.appending(path)) }

    func calcIndexedSlice(_ completeServerData: Node?, startPost: NamedNode, count: Int, reverse: Bool,
                          index: QueryIndex) -> [NamedNode] {
        writeTree.calcIndexedSlice(treePath, completeServerData, startPost: startPost, count: count,
                                   reverse: reverse, index: index)
    }

    func calcCompleteChild(_ childKey: String, _ existingServerCache: CacheNode) -> Node? {
        writeTree.calcCompleteChild(treePath, childKey, existingServerCache)
    }

    func child(_ key: String) -> WriteTreeRef { WriteTreeRef(treePath: treePath.child(key), writeTree: writeTree) }
}
