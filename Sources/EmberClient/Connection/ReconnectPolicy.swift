/// Reconnect delays (reference §6.10, JS `PersistentConnection`): each attempt waits a random
/// fraction of the current delay, which then grows ×`multiplier` up to `maximum`; a connection
/// that stayed up for `resetAfter` starts over from `initial`. Pure: the random source is injected.
public struct ReconnectPolicy: Sendable {
    public var initial: Duration
    public var maximum: Duration
    public var multiplier: Double
    public var resetAfter: Duration
    /// Returns a number in 0...1; tests pass `{ 1 }` for deterministic delays.
    public var random: @Sendable () -> Double

    public init(initial: Duration = .seconds(1), maximum: Duration = .seconds(30), multiplier: Double = 1.3,
                resetAfter: Duration = .seconds(30), random: @escaping @Sendable () -> Double = { Double.random(in: 0...1) }) {
        self.initial = initial
        self.maximum = maximum
        self.multiplier = multiplier
        self.resetAfter = resetAfter
        self.random = random
    }

    public static let `default` = ReconnectPolicy()
}

/// The state of the backoff between attempts.
struct ReconnectBackoff: Sendable {
    let policy: ReconnectPolicy
    private(set) var currentDelay: Duration

    init(policy: ReconnectPolicy) {
        self.policy = policy
        currentDelay = policy.initial
    }

    /// The wait before the next attempt; `connectedFor` is how long the last connection lasted
    /// (nil when the attempt never connected).
    mutating func nextDelay(connectedFor: Duration?) -> Duration {
        if let connectedFor, connectedFor >= policy.resetAfter { currentDelay = policy.initial }
        let wait = currentDelay * max(0, min(1, policy.random()))
        let grown = currentDelay * policy.multiplier
        currentDelay = grown > policy.maximum ? policy.maximum : grown
        return wait
    }

    mutating func reset() { currentDelay = policy.initial }
}
