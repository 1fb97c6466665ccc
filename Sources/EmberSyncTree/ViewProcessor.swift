import EmberCore

/// Computes a view's new caches and child changes for one operation (SDK `ViewProcessor`).
struct ViewProcessor {
    let filter: NodeFilter

    func apply(_ oldViewCache: ViewCache, _ operation: Operation, _ writes: WriteTreeRef,
               _ completeCache: Node?) -> (viewCache: ViewCache, changes: [Change]) {
        var acc: ChildChangeAccumulator? = ChildChangeAccumulator()
        let newViewCache: ViewCache
        switch operation {
        case .overwrite(let source, let path, let node):
            if source.fromUser {
                newViewCache = applyUserOverwrite(oldViewCache, path, node, writes, completeCache, &acc)
            } else {
                let filterServerNode = source.tagged || (oldViewCache.serverCache.filtered && !path.isRoot)
                newViewCache = applyServerOverwrite(oldViewCache, path, node, writes, completeCache,
                                                    filterServerNode, &acc)
            }
        case .merge(let source, let path, let tree):
            if source.fromUser {
                newViewCache = applyUserMerge(oldViewCache, path, tree, writes, completeCache, &acc)
            } else {
                let filterServerNode = source.tagged || oldViewCache.serverCache.filtered
                newViewCache = applyServerMerge(oldViewCache, path, tree, writes, completeCache, filterServerNode, &acc)
            }
        case .ackUserWrite(let path, let affected, let revert):
            if revert {
                newViewCache = revertUserWrite(oldViewCache, path, writes, completeCache, &acc)
            } else {
                newViewCache = ackUserWrite(oldViewCache, path, affected, writes, completeCache, &acc)
            }
        case .listenComplete(_, let path):
            newViewCache = listenComplete(oldViewCache, path, writes, &acc)
        }
        var changes = acc!.all
        maybeAddValueEvent(oldViewCache, newViewCache, &changes)
        return (newViewCache, changes)
    }

    private func maybeAddValueEvent(_ old: ViewCache, _ new: ViewCache, _ changes: inout [Change]) {
        let eventSnap = new.eventCache
        guard eventSnap.fullyInitialized else { return }
        let node = eventSnap.node
        let isLeafOrEmpty = node.isLeaf || node.isEmpty
        let oldComplete = old.completeEventSnap
        if !changes.isEmpty || !old.eventCache.fullyInitialized
            || (isLeafOrEmpty && node != oldComplete)
            || node.priority != oldComplete?.priority {
            changes.append(.value(node))
        }
    }

    private func generateEventCacheAfterServerEvent(_ viewCache: ViewCache, _ changePath: Path, _ writes: WriteTreeRef,
                                                    _ source: CompleteChildSource,
                                                    _ acc: inout ChildChangeAccumulator?) -> ViewCache {
        let oldEventSnap = viewCache.eventCache
        if writes.shadowingWrite(changePath) != nil { return viewCache }
        let newEventCache: Node
        if changePath.isRoot {
            if viewCache.serverCache.filtered {
                // Only complete children may get writes applied, or events would fire for partial data.
                let serverCache = viewCache.completeServerSnap
                let completeChildren = (serverCache?.isLeaf ?? true) ? Node.empty : serverCache!
                let completeEventChildren = writes.calcCompleteEventChildren(completeChildren)
                newEventCache = filter.updateFullNode(oldEventSnap.node, completeEventChildren, &acc)
            } else {
                let completeNode = writes.calcCompleteEventCache(viewCache.completeServerSnap) ?? .empty
                newEventCache = filter.updateFullNode(oldEventSnap.node, completeNode, &acc)
            }
        } else {
            let childKey = changePath.first!
            if childKey == priorityKey {
                let serverNode = viewCache.serverCache.node
                if let updatedPriority = writes.calcEventCacheAfterServerOverwrite(changePath, existingServerSnap: serverNode) {
                    newEventCache = filter.updatePriority(oldEventSnap.node, updatedPriority)
                } else {
                    newEventCache = oldEventSnap.node
                }
            } else {
                let childChangePath = changePath.dropFirst
                let newEventChild: Node?
                if oldEventSnap.isCompleteForChild(childKey) {
                    let serverNode = viewCache.serverCache.node
                    if let update = writes.calcEventCacheAfterServerOverwrite(changePath, existingServerSnap: serverNode) {
                        newEventChild = oldEventSnap.node.immediateChild(childKey).updatingChild(childChangePath, update)
                    } else {
                        newEventChild = oldEventSnap.node.immediateChild(childKey)
                    }
                } else {
                    newEventChild = writes.calcCompleteChild(childKey, viewCache.serverCache)
                }
                if let newEventChild {
                    newEventCache = filter.updateChild(oldEventSnap.node, childKey, newEventChild, childChangePath,
                                                       source, &acc)
                } else {
                    newEventCache = oldEventSnap.node
                }
            }
        }
        return viewCache.updatingEventSnap(newEventCache, complete: oldEventSnap.fullyInitialized || changePath.isRoot,
                                           filtered: filter.filtersNodes)
    }

    private func applyServerOverwrite(_ oldViewCache: ViewCache, _ changePath: Path, _ changedSnap: Node,
                                      _ writes: WriteTreeRef, _ completeCache: Node?, _ filterServerNode: Bool,
                                      _ acc: inout ChildChangeAccumulator?) -> ViewCache {
        let oldServerSnap = oldViewCache.serverCache
        let serverFilter: NodeFilter = filterServerNode ? filter : filter.indexedFilter
        var none: ChildChangeAccumulator? = nil
        let newServerCache: Node
        if changePath.isRoot {
            newServerCache = serverFilter.updateFullNode(oldServerSnap.node, changedSnap, &none)
        } else if serverFilter.filtersNodes && !oldServerSnap.filtered {
            // Filtering a node that was not filtered yet: simulate a full update.
            let newServerNode = oldServerSnap.node.updatingChild(changePath, changedSnap)
            newServerCache = serverFilter.updateFullNode(oldServerSnap.node, newServerNode, &none)
        } else {
            let childKey = changePath.first!
            if !oldServerSnap.isCompleteForPath(changePath) && changePath.count > 1 {
                // Deep updates to incomplete nodes are meant for other listeners.
                return oldViewCache
            }
            let childChangePath = changePath.dropFirst
            let newChildNode = oldServerSnap.node.immediateChild(childKey).updatingChild(childChangePath, changedSnap)
            if childKey == priorityKey {
                newServerCache = serverFilter.updatePriority(oldServerSnap.node, newChildNode)
            } else {
                newServerCache = serverFilter.updateChild(oldServerSnap.node, childKey, newChildNode, childChangePath,
                                                          NoCompleteChildSource(), &none)
            }
        }
        let newViewCache = oldViewCache.updatingServerSnap(
            newServerCache, complete: oldServerSnap.fullyInitialized || changePath.isRoot,
            filtered: serverFilter.filtersNodes)
        let source = WriteTreeCompleteChildSource(writes: writes, viewCache: newViewCache, optCompleteServerCache: completeCache)
        return generateEventCacheAfterServerEvent(newViewCache, changePath, writes, source, &acc)
    }

    private func applyUserOverwrite(_ oldViewCache: ViewCache, _ changePath: Path, _ changedSnap: Node,
                                    _ writes: WriteTreeRef, _ completeCache: Node?,
                                    _ acc: inout ChildChangeAccumulator?) -> ViewCache {
        let oldEventSnap = oldViewCache.eventCache
        let source = WriteTreeCompleteChildSource(writes: writes, viewCache: oldViewCache, optCompleteServerCache: completeCache)
        if changePath.isRoot {
            let newEventCache = filter.updateFullNode(oldEventSnap.node, changedSnap, &acc)
            return oldViewCache.updatingEventSnap(newEventCache, complete: true, filtered: filter.filtersNodes)
        }
        let childKey = changePath.first!
        if childKey == priorityKey {
            let newEventCache = filter.updatePriority(oldEventSnap.node, changedSnap)
            return oldViewCache.updatingEventSnap(newEventCache, complete: oldEventSnap.fullyInitialized,
                                                  filtered: oldEventSnap.filtered)
        }
        let childChangePath = changePath.dropFirst
        let oldChild = oldEventSnap.node.immediateChild(childKey)
        let newChild: Node
        if childChangePath.isRoot {
            newChild = changedSnap
        } else if let childNode = source.completeChild(childKey) {
            if childChangePath.last == priorityKey && childNode.descendant(childChangePath.parent!).isEmpty {
                // A priority write on an empty node: the server will send the priority with the data.
                newChild = childNode
            } else {
                newChild = childNode.updatingChild(childChangePath, changedSnap)
            }
        } else {
            newChild = .empty
        }
        if oldChild == newChild { return oldViewCache }
        let newEventSnap = filter.updateChild(oldEventSnap.node, childKey, newChild, childChangePath, source, &acc)
        return oldViewCache.updatingEventSnap(newEventSnap, complete: oldEventSnap.fullyInitialized,
                                              filtered: filter.filtersNodes)
    }

    private func applyUserMerge(_ viewCache: ViewCache, _ path: Path, _ changedChildren: ImmutableTree<Node>,
                                _ writes: WriteTreeRef, _ completeCache: Node?,
                                _ acc: inout ChildChangeAccumulator?) -> ViewCache {
        // Changes to children currently in view go first, so a limit window has room for new ones.
        var cur = viewCache
        changedChildren.foreach { rel, node in
            let writePath = path.appending(rel)
            if viewCache.eventCache.isCompleteForChild(writePath.first!) {
                cur = applyUserOverwrite(cur, writePath, node, writes, completeCache, &acc)
            }
        }
        changedChildren.foreach { rel, node in
            let writePath = path.appending(rel)
            if !viewCache.eventCache.isCompleteForChild(writePath.first!) {
                cur = applyUserOverwrite(cur, writePath, node, writes, completeCache, &acc)
            }
        }
        return cur
    }

    private func applyMerge(_ node: Node, _ merge: ImmutableTree<Node>) -> Node {
        var node = node
        merge.foreach { rel, child in node = node.updatingChild(rel, child) }
        return node
    }

    private func applyServerMerge(_ viewCache: ViewCache, _ path: Path, _ changedChildren: ImmutableTree<Node>,
                                  _ writes: WriteTreeRef, _ completeCache: Node?, _ filterServerNode: Bool,
                                  _ acc: inout ChildChangeAccumulator?) -> ViewCache {
        // Without any cache this merge was meant for an earlier listen here; wait for full data.
        if viewCache.serverCache.node.isEmpty && !viewCache.serverCache.fullyInitialized { return viewCache }
        var cur = viewCache
        let mergeTree = path.isRoot ? changedChildren : ImmutableTree<Node>.empty.settingTree(path, changedChildren)
        let serverNode = viewCache.serverCache.node
        let keys = mergeTree.sortedChildKeys
        for key in keys where serverNode.hasChild(key) {
            let newChild = applyMerge(serverNode.immediateChild(key), mergeTree.children[key]!)
            cur = applyServerOverwrite(cur, Path(validated: [key]), newChild, writes, completeCache, filterServerNode, &acc)
        }
        for key in keys where !serverNode.hasChild(key) {
            let childTree = mergeTree.children[key]!
            let isUnknownDeepMerge = !viewCache.serverCache.isCompleteForChild(key) && childTree.value == nil
            if isUnknownDeepMerge { continue }
            let newChild = applyMerge(serverNode.immediateChild(key), childTree)
            cur = applyServerOverwrite(cur, Path(validated: [key]), newChild, writes, completeCache, filterServerNode, &acc)
        }
        return cur
    }

    private func ackUserWrite(_ viewCache: ViewCache, _ ackPath: Path, _ affected: ImmutableTree<Bool>,
                              _ writes: WriteTreeRef, _ completeCache: Node?,
                              _ acc: inout ChildChangeAccumulator?) -> ViewCache {
        if writes.shadowingWrite(ackPath) != nil { return viewCache }
        let filterServerNode = viewCache.serverCache.filtered
        let serverCache = viewCache.serverCache
        if affected.value != nil {
            // An overwrite: re-apply the server data now that the write no longer shadows it.
            if (ackPath.isRoot && serverCache.fullyInitialized) || serverCache.isCompleteForPath(ackPath) {
                return applyServerOverwrite(viewCache, ackPath, serverCache.node.descendant(ackPath), writes,
                                            completeCache, filterServerNode, &acc)
            }
            if ackPath.isRoot {
                // Acking here without full data: re-apply what we have as a merge.
                var changed = ImmutableTree<Node>.empty
                for (k, v) in serverCache.node.children { changed = changed.setting(Path(validated: [k]), v) }
                return applyServerMerge(viewCache, ackPath, changed, writes, completeCache, filterServerNode, &acc)
            }
            return viewCache
        }
        var changed = ImmutableTree<Node>.empty
        affected.foreach { mergePath, _ in
            let serverCachePath = ackPath.appending(mergePath)
            if serverCache.isCompleteForPath(serverCachePath) {
                changed = changed.setting(mergePath, serverCache.node.descendant(serverCachePath))
            }
        }
        return applyServerMerge(viewCache, ackPath, changed, writes, completeCache, filterServerNode, &acc)
    }

    private func listenComplete(_ viewCache: ViewCache, _ path: Path, _ writes: WriteTreeRef,
                                _ acc: inout ChildChangeAccumulator?) -> ViewCache {
        let old = viewCache.serverCache
        let newViewCache = viewCache.updatingServerSnap(old.node, complete: old.fullyInitialized || path.isRoot,
                                                        filtered: old.filtered)
        return generateEventCacheAfterServerEvent(newViewCache, path, writes, NoCompleteChildSource(), &acc)
    }

    private func revertUserWrite(_ viewCache: ViewCache, _ path: Path, _ writes: WriteTreeRef,
                                 _ completeServerCache: Node?, _ acc: inout ChildChangeAccumulator?) -> ViewCache {
        if writes.shadowingWrite(path) != nil { return viewCache }
        let source = WriteTreeCompleteChildSource(writes: writes, viewCache: viewCache,
                                                  optCompleteServerCache: completeServerCache)
        let oldEventCache = viewCache.eventCache.node
        var newEventCache: Node
        if path.isRoot || path.first == priorityKey {
            let newNode: Node
            if viewCache.serverCache.fullyInitialized {
                newNode = writes.calcCompleteEventCache(viewCache.completeServerSnap) ?? .empty
            } else {
                newNode = writes.calcCompleteEventChildren(viewCache.serverCache.node)
            }
            newEventCache = filter.updateFullNode(oldEventCache, newNode, &acc)
        } else {
            let childKey = path.first!
            var newChild = writes.calcCompleteChild(childKey, viewCache.serverCache)
            if newChild == nil && viewCache.serverCache.isCompleteForChild(childKey) {
                newChild = oldEventCache.immediateChild(childKey)
            }
            if let newChild {
                newEventCache = filter.updateChild(oldEventCache, childKey, newChild, path.dropFirst, source, &acc)
            } else if viewCache.eventCache.node.hasChild(childKey) {
                newEventCache = filter.updateChild(oldEventCache, childKey, .empty, path.dropFirst, source, &acc)
            } else {
                newEventCache = oldEventCache
            }
            if newEventCache.isEmpty && viewCache.serverCache.fullyInitialized {
                // All child writes may be reverted; the old value may have been a leaf.
                if let complete = writes.calcCompleteEventCache(viewCache.completeServerSnap), complete.isLeaf {
                    newEventCache = filter.updateFullNode(newEventCache, complete, &acc)
                }
            }
        }
        let complete = viewCache.serverCache.fullyInitialized || writes.shadowingWrite(.root) != nil
        return viewCache.updatingEventSnap(newEventCache, complete: complete, filtered: filter.filtersNodes)
    }
}
