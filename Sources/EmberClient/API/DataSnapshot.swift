import EmberCore
import Foundation

/// An immutable copy of the data at a location at the time of an event (SDK `DataSnapshot`).
/// `children` follow the observed query's order. See `ValueConverter` for the `value` shapes.
public struct DataSnapshot: Sendable, CustomStringConvertible {
    let node: Node
    /// The location the data came from.
    public let ref: DatabaseReference
    let index: QueryIndex

    init(node: Node, ref: DatabaseReference, index: QueryIndex) {
        self.node = node
        self.ref = ref
        self.index = index
    }

    /// The last path segment of the location ("" for the root).
    public var key: String { ref.key ?? "" }

    /// The data as `nil`, `String`, `Bool`, `NSNumber`, `[String: Any]` or `[Any]`.
    public var value: Any? { ValueConverter.value(of: node) }

    /// The data with priorities (`.priority`, `.value` keys) and never as arrays.
    public var valueInExportFormat: Any? { node.isEmpty ? nil : ValueConverter.value(of: node.exportJSON()) }

    public var priority: Any? { ValueConverter.priorityValue(node.priority) }

    public func exists() -> Bool { !node.isEmpty }

    public var childrenCount: UInt { UInt(node.childCount) }

    public func hasChildren() -> Bool { node.hasChildren }

    public func hasChild(_ childPathString: String) -> Bool {
        guard let p = try? Path(childPathString) else { return false }
        return !node.child(at: p).isEmpty
    }

    public func childSnapshot(forPath childPathString: String) -> DataSnapshot {
        let p = (try? Path(childPathString)) ?? .root
        return DataSnapshot(node: node.child(at: p), ref: ref.child(atPath: p), index: .priority)
    }

    /// Direct children in the query's order (priority order for plain locations), enumerated
    /// like the SDK's `NSEnumerator` (see `DatabaseEnumerator`).
    public var children: DatabaseEnumerator<DataSnapshot> {
        DatabaseEnumerator(QuerySpec(index: index).sortedChildren(of: node).map {
            DataSnapshot(node: $0.node, ref: ref.child(atPath: Path(validated: [$0.key])), index: .priority)
        })
    }

    /// The data as JSON text (export format), handy for logs and tests.
    public var jsonString: String { node.exportJSON().serialized() }

    public var description: String { "Snap (\(key)) \(jsonString)" }
}
