import Synchronization

/// The request budget of each client address, across all its connections (REST keep-alive
/// connections and WebSocket sessions share it), so opening new connections does not reset it.
///
/// The table is bounded (`maxAddresses`). An entry idle long enough for its bucket to refill is
/// the same as no entry, so such entries are dropped (swept at most once per `sweepEveryMs`);
/// when the table is still full, the longest-idle address is dropped for the new one.
public final class RequestRateByAddress: Sendable {
    /// Addresses tracked at once.
    public static let defaultMaxAddresses = 100_000
    /// Interval between sweeps of idle entries.
    static let sweepEveryMs: Int64 = 1_000

    struct Entry {
        var bucket: TokenBucket
        var lastSeenMs: Int64
    }

    struct Table {
        var entries: [String: Entry] = [:]
        var lastSweepMs: Int64 = 0
    }

    public let rate: RequestRateLimit
    public let maxAddresses: Int
    /// Idle time after which an entry's bucket is full again (so it can be forgotten).
    let idleMs: Int64
    private let table = Mutex(Table())

    public init(rate: RequestRateLimit, maxAddresses: Int = RequestRateByAddress.defaultMaxAddresses) {
        precondition(maxAddresses > 0, "the address table needs room for at least one address")
        self.rate = rate
        self.maxAddresses = maxAddresses
        idleMs = rate.isEnabled ? Int64((max(1, rate.burst) / rate.perSecond * 1000).rounded(.up)) + 1 : 0
    }

    /// Takes one request from `address`'s budget; false when it is over the rate. Requests without
    /// an address (tests, Unix sockets) are not counted.
    public func admit(_ address: String?, now: Int64) -> Bool {
        guard rate.isEnabled, let address else { return true }
        return table.withLock { t in
            if var e = t.entries[address] {
                let ok = e.bucket.take(now: now)
                e.lastSeenMs = now
                t.entries[address] = e
                return ok
            }
            if t.entries.count >= maxAddresses { makeRoom(&t, now: now) }
            var bucket = rate.bucket(now: now)!
            let ok = bucket.take(now: now)
            t.entries[address] = Entry(bucket: bucket, lastSeenMs: now)
            return ok
        }
    }

    private func makeRoom(_ t: inout Table, now: Int64) {
        if now - t.lastSweepMs >= Self.sweepEveryMs {
            t.lastSweepMs = now
            t.entries = t.entries.filter { now - $0.value.lastSeenMs < idleMs }
        }
        if t.entries.count >= maxAddresses, let oldest = t.entries.min(by: { $0.value.lastSeenMs < $1.value.lastSeenMs }) {
            t.entries.removeValue(forKey: oldest.key)
        }
    }

    var trackedAddresses: Int { table.withLock { $0.entries.count } }

    /// Wire message for a refused request.
    public var refusal: String { "Too many requests from this address (limit \(Int(rate.perSecond)) per second)" }
}
