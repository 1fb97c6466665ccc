import EmberCore

/// A set of overwrites at relative paths, layered so that a write at a path replaces everything
/// below it (SDK `CompoundWrite`).
struct CompoundWrite: Sendable {
    var tree: ImmutableTree<Node>

    static let empty = CompoundWrite(tree: .empty)

    var isEmpty: Bool { tree.isEmpty }

    func addingWrite(_ path: Path, _ node: Node) -> CompoundWrite {
        if path.isRoot { return CompoundWrite(tree: ImmutableTree(value: node)) }
        if let (rootMostPath, value) = tree.findRootMostValueAndPath(path) {
            let relative = rootMostPath.relative(path)!
            return CompoundWrite(tree: tree.setting(rootMostPath, value.updatingChild(relative, node)))
        }
        return CompoundWrite(tree: tree.settingTree(path, ImmutableTree(value: node)))
    }

    func addingWrites(_ path: Path, _ updates: [(Path, Node)]) -> CompoundWrite {
        var result = self
        for (rel, node) in updates { result = result.addingWrite(path.appending(rel), node) }
        return result
    }

    func removingWrite(_ path: Path) -> CompoundWrite {
        if path.isRoot { return .empty }
        return CompoundWrite(tree: tree.settingTree(path, .empty))
    }

    func hasCompleteWrite(_ path: Path) -> Bool { completeNode(path) != nil }

    /// The node a write fully determines at `path`, if any.
    func completeNode(_ path: Path) -> Node? {
        guard let (rootMostPath, value) = tree.findRootMostValueAndPath(path) else { return nil }
        return value.descendant(rootMostPath.relative(path)!)
    }

    /// The children this write fully determines (with their keys).
    func completeChildren() -> [NamedNode] {
        if let node = tree.value {
            guard !node.isLeaf else { return [] }
            return node.sortedChildren(by: .priority)
        }
        var result: [NamedNode] = []
        for key in tree.sortedChildKeys {
            if let v = tree.children[key]!.value { result.append(NamedNode(key: key, node: v)) }
        }
        return result
    }

    func childCompoundWrite(_ path: Path) -> CompoundWrite {
        if path.isRoot { return self }
        if let shadowing = completeNode(path) { return CompoundWrite(tree: ImmutableTree(value: shadowing)) }
        return CompoundWrite(tree: tree.subtree(path))
    }

    /// Applies these writes on top of `node`.
    func apply(to node: Node) -> Node {
        CompoundWrite.applySubtree(.root, tree, node)
    }

    private static func applySubtree(_ relativePath: Path, _ writeTree: ImmutableTree<Node>, _ node: Node) -> Node {
        if let value = writeTree.value { return node.updatingChild(relativePath, value) }
        var node = node
        var priorityWrite: Node? = nil
        for key in writeTree.sortedChildKeys {
            let childTree = writeTree.children[key]!
            if key == priorityKey {
                priorityWrite = childTree.value
            } else {
                node = applySubtree(relativePath.child(key), childTree, node)
            }
        }
        if let priorityWrite, !node.descendant(relativePath).isEmpty {
            node = node.updatingChild(relativePath.child(priorityKey), priorityWrite)
        }
        return node
    }
}
