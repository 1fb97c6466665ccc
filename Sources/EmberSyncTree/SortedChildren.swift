import EmberCore

/// A view's event-cache children in its query's index order, kept up to date from the view's
/// child changes, so the previous sibling of a child (`prevName` of child events) is a binary
/// search — O(log n) comparisons — instead of a scan of every child. Inserting or removing
/// shifts the array (one memmove). Index values are computed once per child, not per comparison.
struct SortedChildren {
    struct Entry {
        var key: String
        var value: IndexValue
    }

    let index: QueryIndex
    private(set) var entries: [Entry] = []

    init(index: QueryIndex, node: Node) {
        self.index = index
        rebuild(node)
    }

    var count: Int { entries.count }

    mutating func rebuild(_ node: Node) {
        var fresh = node.children.map { Entry(key: $0.key, value: entryValue($0.value)) }
        fresh.sort { less($0, $1) }
        entries = fresh
    }

    private func entryValue(_ node: Node) -> IndexValue {
        index == .key ? .null : index.indexValue(of: node)
    }

    private func less(_ a: Entry, _ b: Entry) -> Bool {
        if index != .key {
            let c = a.value.compare(b.value)
            if c != 0 { return c < 0 }
        }
        return KeyOrder.compare(a.key, b.key) < 0
    }

    /// The first position whose entry does not sort before `e`.
    private func lowerBound(_ e: Entry) -> Int {
        var lo = 0, hi = entries.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if less(entries[mid], e) { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// Removes the child `key` whose node was `node`; false when it is not where it should be.
    private mutating func remove(_ key: String, _ node: Node) -> Bool {
        let i = lowerBound(Entry(key: key, value: entryValue(node)))
        guard i < entries.count, entries[i].key == key else { return false }
        entries.remove(at: i)
        return true
    }

    private mutating func insert(_ key: String, _ node: Node) {
        let e = Entry(key: key, value: entryValue(node))
        entries.insert(e, at: lowerBound(e))
    }

    /// Follows one operation's child changes to `eventCache` (the view's new event cache); when
    /// the changes do not account for the cache (they always should), rebuilds from it.
    mutating func update(_ changes: [Change], eventCache: Node) {
        // Many changes at once (a large overwrite): one sort beats many shifting inserts.
        if changes.count > 16 && changes.count > entries.count / 4 {
            rebuild(eventCache)
            return
        }
        var consistent = true
        for change in changes {
            guard let key = change.childKey else { continue }
            switch change.type {
            case .childRemoved:
                consistent = consistent && remove(key, change.node)
            case .childAdded:
                insert(key, change.node)
            case .childChanged:
                consistent = consistent && remove(key, change.oldNode ?? change.node)
                insert(key, change.node)
            default:
                break
            }
            if !consistent { break }
        }
        if !consistent || entries.count != eventCache.children.count {
            rebuild(eventCache)
        }
        assert(entries.count > 64 || isConsistent(with: eventCache), "sorted children out of step with the event cache")
    }

    /// The key before `key` (whose node is `node`) in index order: `.some(nil)` when it is the
    /// first; nil when `key` is not where the index says (the caller falls back to a scan).
    func predecessor(of key: String, _ node: Node) -> String?? {
        let i = lowerBound(Entry(key: key, value: entryValue(node)))
        guard i < entries.count, entries[i].key == key else { return nil }
        return .some(i == 0 ? nil : entries[i - 1].key)
    }

    private func isConsistent(with node: Node) -> Bool {
        var fresh = self
        fresh.rebuild(node)
        return fresh.entries.map(\.key).elementsEqual(entries.map(\.key), by: { $0.isExactly($1) })
    }
}
