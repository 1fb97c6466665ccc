import NIOCore
import Synchronization

/// Open WebSocket connections and SSE streams per client address: one address cannot take the
/// node's connection table for itself. `limit` 0 turns the limit off.
public final class ConnectionsPerAddress: Sendable {
    public let limit: Int
    private let counts = Mutex<[String: Int]>([:])

    public init(limit: Int) {
        self.limit = limit
    }

    /// Takes a slot for `address`; false when it already holds `limit` connections. A connection
    /// without an address (tests) is not counted.
    public func acquire(_ address: String?) -> Bool {
        guard limit > 0, let address else { return true }
        return counts.withLock { c in
            let n = c[address, default: 0]
            guard n < limit else { return false }
            c[address] = n + 1
            return true
        }
    }

    public func release(_ address: String?) {
        guard limit > 0, let address else { return }
        counts.withLock { c in
            guard let n = c[address] else { return }
            if n <= 1 { c.removeValue(forKey: address) } else { c[address] = n - 1 }
        }
    }

    public func count(_ address: String) -> Int { counts.withLock { $0[address] ?? 0 } }

    /// Message of the refusal (HTTP 429 body, WebSocket close reason).
    public var refusal: String { "Too many connections from this address (limit \(limit))" }
}

/// The request budget of each REST keep-alive connection, forgotten when the connection closes.
public final class RequestRateByConnection: Sendable {
    public let rate: RequestRateLimit
    private let buckets = Mutex<[ObjectIdentifier: TokenBucket]>([:])

    public init(rate: RequestRateLimit) {
        self.rate = rate
    }

    /// Takes one request from the connection's budget; false when it is over the rate.
    public func admit(_ channel: (any Channel)?, now: Int64) -> Bool {
        guard rate.isEnabled, let channel else { return true }
        let key = ObjectIdentifier(channel)
        let (ok, isNew) = buckets.withLock { b -> (Bool, Bool) in
            var isNew = false
            if b[key] == nil {
                b[key] = rate.bucket(now: now)
                isNew = true
            }
            return (b[key]!.take(now: now), isNew)
        }
        // The channel outlives its entry: the close callback runs before it can be freed.
        if isNew { channel.closeFuture.whenComplete { _ in self.forget(key) } }
        return ok
    }

    private func forget(_ key: ObjectIdentifier) {
        _ = buckets.withLock { $0.removeValue(forKey: key) }
    }

    var trackedConnections: Int { buckets.withLock { $0.count } }
}
