import Foundation

/// One event from `events(_:)`: the snapshot and, for child events, the previous sibling's key.
public struct DatabaseEvent: Sendable {
    public var type: DataEventType
    public var snapshot: DataSnapshot
    public var previousSiblingKey: String?
}

extension DatabaseQuery {
    /// Events of one type as an `AsyncSequence`. The observer is removed when the consumer stops
    /// iterating (or its task is cancelled); a server-side cancel ends the sequence with the error.
    public func events(_ eventType: DataEventType) -> AsyncThrowingStream<DatabaseEvent, any Error> {
        let (stream, continuation) = AsyncThrowingStream<DatabaseEvent, any Error>.makeStream()
        let handle = observe(eventType, andPreviousSiblingKeyWith: { snap, prev in
            continuation.yield(DatabaseEvent(type: eventType, snapshot: snap, previousSiblingKey: prev))
        }, withCancel: { error in
            continuation.finish(throwing: error)
        })
        let repo = repo
        continuation.onTermination = { _ in repo.removeObserver(handle) }
        return stream
    }
}
