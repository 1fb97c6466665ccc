/// The children of a snapshot (or of a transaction's data) one at a time, as the SDK's
/// `NSEnumerator`: `nextObject()` returns the next child until nil, `allObjects` the ones not yet
/// returned (and exhausts it), and it is a sequence, so the SDK's usual forms work:
///
///     for case let child as DataSnapshot in snapshot.children { ... }
///     let first = snapshot.children.nextObject() as? DataSnapshot
///     let all = snapshot.children.allObjects as! [DataSnapshot]
///
/// It is a class of its own rather than Foundation's `NSEnumerator` so its elements keep their
/// type (`snapshot.children.map(\.key)`), on Linux as on Apple platforms.
public final class DatabaseEnumerator<Element>: Sequence, IteratorProtocol {
    private let items: [Element]
    private var position = 0

    init(_ items: [Element]) { self.items = items }

    public func next() -> Element? {
        guard position < items.count else { return nil }
        defer { position += 1 }
        return items[position]
    }

    /// The next element as `Any` (the SDK's `NSEnumerator.nextObject()`).
    public func nextObject() -> Any? { next() }

    /// The elements not yet enumerated; afterwards the enumerator is exhausted.
    public var allObjects: [Any] {
        let rest = items[position...]
        position = items.count
        return Array(rest)
    }

    public var underestimatedCount: Int { items.count - position }
}
