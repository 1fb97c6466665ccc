/// One wire connection's own request budget: `rate` requests per second with a burst, in a token
/// bucket made at the connection's first request (an idle connection holds none). The address's
/// budget, shared with REST, is the node's (`ClientPolicy`); a request must pass both, this one
/// first. Time is an input (ms), so the rule is tested without sleeping.
public struct WireRequestBudget: Sendable, Equatable {
    public let rate: RequestRateLimit
    private var bucket: TokenBucket?

    public init(rate: RequestRateLimit) {
        self.rate = rate
    }

    /// Takes one request from the budget; false when the connection is over its rate (the request
    /// is then answered with `refusal`, through `WireServerSession.refused`).
    public mutating func admit(now: Int64) -> Bool {
        if bucket == nil {
            guard let b = rate.bucket(now: now) else { return true }
            bucket = b
        }
        return bucket!.take(now: now)
    }

    /// The `too_many_requests` message of a request this budget refused.
    public var refusal: String { "Too many requests (limit \(Int(rate.perSecond)) per second)" }
}
