import EmberSyncTree

/// The kinds of events an observer can ask for (SDK `DataEventType`).
public enum DataEventType: Int, Sendable, Hashable, CustomStringConvertible {
    case childAdded = 0
    case childRemoved = 1
    case childChanged = 2
    case childMoved = 3
    case value = 4

    var syncType: EventType {
        switch self {
        case .childAdded: return .childAdded
        case .childRemoved: return .childRemoved
        case .childChanged: return .childChanged
        case .childMoved: return .childMoved
        case .value: return .value
        }
    }

    public var description: String { syncType.description }
}

/// Identifies an observer for `removeObserver(withHandle:)`.
public typealias DatabaseHandle = UInt
