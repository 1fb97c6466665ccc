/// Whether a node serves reads yet, and the client reads it holds until it does (docs/CLUSTER.md
/// "What a member serves while it catches up").
///
/// A cluster member that starts behind (a wiped data directory, or old data after a long stop)
/// must not answer a listen or a read from its stale tree: a client that saw newer data on another
/// member would see it go backwards. So it is *catching up* from its start until it has applied
/// what the cluster had committed when it first asked after starting (its driver asks with a
/// Raft ReadIndex, which answers once this node applied through the leader's commit index).
/// From then on it is *caught up* for good: later lag is ordinary replication lag, served as
/// before. A single node is caught up at start.
///
/// While catching up, each read that arrives is held (at most `maxHeld` at once; more are
/// refused) until the node catches up, or refused once it has waited `maxWaitMillis`. Pure:
/// time comes in as milliseconds, held reads are ids the driver maps to its waiters.
public struct CatchUpGate: Sendable {
    public struct Limits: Sendable, Equatable {
        /// Reads held at once on the node; one more is refused at once.
        public var maxHeld: Int
        /// How long one read is held before it is refused.
        public var maxWaitMillis: Int64

        public init(maxHeld: Int, maxWaitMillis: Int64) {
            precondition(maxHeld >= 0 && maxWaitMillis >= 0, "limits are not negative")
            self.maxHeld = maxHeld
            self.maxWaitMillis = maxWaitMillis
        }

        /// 10,000 reads, 30 s: a wiped member's snapshot of a few GB arrives within that on a
        /// LAN; a client refused after it retries (REST) or reconnects (wire).
        public static let `default` = Limits(maxHeld: 10_000, maxWaitMillis: 30_000)
    }

    public enum Admission: Sendable, Equatable {
        /// Caught up: serve it now.
        case proceed
        /// Held under this id until `reachedCatchUp` or `expire` names it.
        case hold(UInt64)
        /// Refused at once: `maxHeld` reads are held already.
        case refuse(Refusal)
    }

    public enum Refusal: Sendable, Equatable {
        case tooManyHeld(Int)
        case waitedTooLong(millis: Int64)
        /// The node was removed from the cluster: it will never catch up (its data stopped
        /// where it left), so its held reads are refused at once.
        case removed

        /// The refusal's text, after "this node is catching up: ".
        public var reason: String {
            switch self {
            case .tooManyHeld(let n):
                return "\(n) requests already wait for it to apply what the cluster had committed when it started; retry, or use another member"
            case .waitedTooLong(let ms):
                return "it has not applied what the cluster had committed when it started within \(ms) ms; retry, or use another member"
            case .removed:
                return "it was removed from the cluster and will not catch up; use another member"
            }
        }
    }

    public let limits: Limits
    public private(set) var caughtUp: Bool
    /// Held reads: id → deadline (ms).
    private var held: [UInt64: Int64] = [:]
    private var nextID: UInt64 = 1

    public init(caughtUp: Bool, limits: Limits = .default) {
        self.caughtUp = caughtUp
        self.limits = limits
    }

    public var heldCount: Int { held.count }
    public func isHeld(_ id: UInt64) -> Bool { held[id] != nil }
    /// The earliest deadline of a held read (nil: none held).
    public var nextDeadline: Int64? { held.values.min() }

    /// A read arrives at `now`.
    public mutating func arrive(now: Int64) -> Admission {
        if caughtUp { return .proceed }
        guard held.count < limits.maxHeld else { return .refuse(.tooManyHeld(held.count)) }
        let id = nextID
        nextID += 1
        held[id] = now + limits.maxWaitMillis
        return .hold(id)
    }

    /// The node applied what the cluster had committed when it asked: every held read is
    /// released (their ids, in arrival order) and every later one proceeds at once. Once only
    /// matters: later calls release nothing.
    public mutating func reachedCatchUp() -> [UInt64] {
        caughtUp = true
        defer { held.removeAll() }
        return held.keys.sorted()
    }

    /// Held reads whose deadline is `now` or before: refused (`.waitedTooLong`), in arrival order.
    public mutating func expire(now: Int64) -> [UInt64] {
        let due = held.filter { $0.value <= now }.keys.sorted()
        for id in due { held[id] = nil }
        return due
    }

    /// Every held read, refused: the node will not catch up (removed from the cluster).
    public mutating func refuseAll() -> [UInt64] {
        defer { held.removeAll() }
        return held.keys.sorted()
    }

    /// A held read given up by its client (cancelled); false when it was not held any more.
    @discardableResult
    public mutating func leave(_ id: UInt64) -> Bool {
        held.removeValue(forKey: id) != nil
    }
}
