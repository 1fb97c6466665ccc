/// A token bucket: `ratePerSecond` tokens accrue continuously up to `burst`; each request takes
/// one. Time is an input (milliseconds), so tests drive it without sleeping.
public struct TokenBucket: Sendable, Equatable {
    public let ratePerSecond: Double
    public let burst: Double
    private var tokens: Double
    private var lastMs: Int64

    public init(ratePerSecond: Double, burst: Double, now: Int64) {
        precondition(ratePerSecond > 0 && burst >= 1, "a token bucket needs a positive rate and a burst of at least 1")
        self.ratePerSecond = ratePerSecond
        self.burst = burst
        tokens = burst
        lastMs = now
    }

    /// Takes a token if one is available.
    public mutating func take(now: Int64) -> Bool {
        if now > lastMs {
            tokens = min(burst, tokens + Double(now - lastMs) * ratePerSecond / 1000)
            lastMs = now
        } else if now < lastMs {
            // The wall clock was set back: no time passed, but refills count from now (else an
            // empty bucket would stay empty until the clock is back where it was).
            lastMs = now
        }
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}

/// Requests per second one connection may make (WebSocket requests, or REST requests on one
/// keep-alive connection). 0 turns the limit off.
public struct RequestRateLimit: Sendable, Equatable {
    public var perSecond: Double = 1_000
    /// Requests allowed at once after a quiet period.
    public var burst: Double = 2_000
    public init() {}

    public var isEnabled: Bool { perSecond > 0 }

    public func bucket(now: Int64) -> TokenBucket? {
        isEnabled ? TokenBucket(ratePerSecond: perSecond, burst: max(1, burst), now: now) : nil
    }
}
