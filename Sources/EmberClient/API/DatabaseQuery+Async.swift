import Foundation

extension DatabaseQuery {
    /// The first event of `eventType` with the previous sibling's key (nil for the first child
    /// and for value events): the SDK's async `observeSingleEventAndPreviousSiblingKey(of:)`.
    /// Like the SDK's (and `observeSingleEvent(of:)`), it does not throw: if the server refuses
    /// the listen (rules) it does not return; use the callback form with `withCancel` to see that.
    public func observeSingleEventAndPreviousSiblingKey(of eventType: DataEventType) async -> (DataSnapshot, String?) {
        await withCheckedContinuation { (cont: CheckedContinuation<(DataSnapshot, String?), Never>) in
            observeSingleEvent(of: eventType, andPreviousSiblingKeyWith: { snap, prev in cont.resume(returning: (snap, prev)) })
        }
    }
}
