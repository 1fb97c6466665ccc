import EmberCore

/// Turns a view's changes into ordered events for its registrations (SDK `EventGenerator`):
/// removed, added, moved, changed, then value; within a type by the child's index position.
struct EventGenerator {
    let query: SyncQuery

    /// `sorted` holds `eventCache`'s children in index order: previous siblings are binary searches.
    func events(for changes: [Change], eventCache: Node, sorted: SortedChildren, registrations: [RegistrationID]) -> [Event] {
        let index = query.spec.index
        var moves: [Change] = []
        for change in changes where change.type == .childChanged {
            if let old = change.oldNode, index.indexedValueChanged(old, change.node) {
                moves.append(.childMoved(change.childKey!, change.node))
            }
        }
        var events: [Event] = []
        func emit(_ type: EventType, _ list: [Change]) {
            let filtered = list.filter { $0.type == type }.sorted { a, b in
                guard let ka = a.childKey, let kb = b.childKey else { return false }
                return index.compare(NamedNode(key: ka, node: a.node), NamedNode(key: kb, node: b.node)) < 0
            }
            for change in filtered {
                var prevName: String? = nil
                if type != .value && type != .childRemoved, let key = change.childKey {
                    if let node = eventCache.children[key], let found = sorted.predecessor(of: key, node) {
                        prevName = found
                    } else {
                        prevName = eventCache.predecessorKey(of: key, by: index)
                    }
                }
                for reg in registrations {
                    events.append(Event(type: type, registration: reg, query: query, childKey: change.childKey,
                                        node: change.node, prevName: prevName))
                }
            }
        }
        emit(.childRemoved, changes)
        emit(.childAdded, changes)
        emit(.childMoved, moves)
        emit(.childChanged, changes)
        emit(.value, changes)
        return events
    }
}
