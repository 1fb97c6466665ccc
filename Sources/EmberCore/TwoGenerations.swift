/// A bounded map that keeps what was inserted lately: two generations, each holding entries
/// of at most `limit` weight in all (each entry weighs 1 unless its insert says otherwise);
/// when an insert would take the newer one past it, the newer becomes the older and the older
/// goes. Lookups see both. The trigger caches (decoded change records, serialized event
/// members and batches of them) use it: delivery lanes a window or two apart near a stream's
/// end find what the first of them made.
///
/// Inlinable: the caches live in other modules, which then specialize it for their keys and
/// values. Unspecialized, each lookup and insert went through generic witnesses and run-time
/// metadata lookups (in a delivering leader's profile under the record cache's inserts, which
/// its writer makes for every matching write).
public struct TwoGenerations<Key: Hashable, Value> {
    public let limit: Int
    @usableFromInline var current: [Key: Value] = [:]
    @usableFromInline var previous: [Key: Value] = [:]
    @usableFromInline var weight = 0

    @inlinable
    public init(limit: Int) {
        precondition(limit > 0, "a generation holds at least one entry")
        self.limit = limit
    }

    @inlinable
    public func find(_ k: Key) -> Value? { current[k] ?? previous[k] }

    /// An entry heavier than `limit` still goes in (alone in its generation).
    @inlinable
    public mutating func insert(_ k: Key, _ v: Value, weight w: Int = 1) {
        precondition(w > 0, "an entry weighs something")
        if weight + w > limit && !current.isEmpty {
            previous = current
            current = [:]
            weight = 0
        }
        current[k] = v
        weight += w
    }

    /// Entries held (both generations; a key in both counts twice).
    @inlinable
    public var count: Int { current.count + previous.count }
}

extension TwoGenerations: Sendable where Key: Sendable, Value: Sendable {}
