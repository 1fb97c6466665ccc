import EmberCore

/// Event kinds, in the order a view raises them within one operation.
public enum EventType: Int, Sendable, Hashable, Comparable, CustomStringConvertible {
    case childRemoved = 0
    case childAdded = 1
    case childMoved = 2
    case childChanged = 3
    case value = 4

    public static func < (a: EventType, b: EventType) -> Bool { a.rawValue < b.rawValue }

    public var description: String {
        switch self {
        case .childRemoved: return "child_removed"
        case .childAdded: return "child_added"
        case .childMoved: return "child_moved"
        case .childChanged: return "child_changed"
        case .value: return "value"
        }
    }
}

/// Identifies one event registration (a callback) chosen by the host.
public struct RegistrationID: Sendable, Hashable, CustomStringConvertible {
    public var raw: Int
    public init(_ raw: Int) { self.raw = raw }
    public var description: String { "#\(raw)" }
}

/// A listened location: a path and query parameters.
public struct SyncQuery: Sendable, Hashable, CustomStringConvertible {
    public var path: Path
    public var spec: QuerySpec

    public init(path: Path, spec: QuerySpec = .default) {
        self.path = path
        self.spec = spec
    }

    /// A query that only orders (or the default query) is listened to on the wire as the default query.
    public var forListening: SyncQuery {
        spec.loadsAllData && !spec.isDefault ? SyncQuery(path: path) : self
    }

    public var description: String { spec.isDefault ? path.description : "\(path) \(spec)" }
}

/// An event to deliver to one registration.
public struct Event: Sendable, Equatable, CustomStringConvertible {
    public var type: EventType
    /// The registration the event is for, and the query it registered.
    public var registration: RegistrationID
    public var query: SyncQuery
    /// The child key for child events; nil for `value`.
    public var childKey: String?
    /// Child events: the child (for `childRemoved`, the old child). Value: the whole view.
    public var node: Node
    /// Key of the preceding sibling in the query's order (child events other than removed).
    public var prevName: String?

    public init(type: EventType, registration: RegistrationID, query: SyncQuery, childKey: String?, node: Node,
                prevName: String?) {
        self.type = type
        self.registration = registration
        self.query = query
        self.childKey = childKey
        self.node = node
        self.prevName = prevName
    }

    /// The snapshot's location: the query path, or the child's path for child events.
    public var snapshotPath: Path {
        if let childKey { return query.path.child(childKey) }
        return query.path
    }

    public var description: String {
        var s = "\(type) @\(query)"
        if let childKey { s += " \(childKey)" }
        if type != .value && type != .childRemoved { s += " prev=\(prevName ?? "nil")" }
        return s + " " + node.exportJSON().serialized()
    }
}
