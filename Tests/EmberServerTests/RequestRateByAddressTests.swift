import Testing
@testable import EmberCluster
@testable import EmberNodeStore
@testable import EmberServer

struct RequestRateByAddressTests {
    func rate(_ perSecond: Double, burst: Double) -> RequestRateLimit {
        var r = RequestRateLimit()
        r.perSecond = perSecond
        r.burst = burst
        return r
    }

    @Test func oneBudgetPerAddressAndAddressesAreIndependent() {
        let limiter = RequestRateByAddress(rate: rate(10, burst: 2))
        #expect(limiter.admit("10.0.0.1", now: 0) && limiter.admit("10.0.0.1", now: 0))
        #expect(!limiter.admit("10.0.0.1", now: 0), "the burst is spent")
        #expect(limiter.admit("10.0.0.2", now: 0), "another address has its own budget")
        #expect(limiter.admit("10.0.0.1", now: 100), "10/s gives one back after 100 ms")
        #expect(limiter.admit(nil, now: 0), "no address: not counted")
    }

    @Test func offAdmitsEverything() {
        let limiter = RequestRateByAddress(rate: rate(0, burst: 1))
        #expect((0..<100).allSatisfy { _ in limiter.admit("10.0.0.1", now: 0) })
        #expect(limiter.trackedAddresses == 0)
    }

    @Test func tableIsBoundedAndIdleEntriesAreDropped() {
        let limiter = RequestRateByAddress(rate: rate(10, burst: 2), maxAddresses: 3)
        for i in 0..<3 { _ = limiter.admit("10.0.0.\(i)", now: 0) }
        #expect(limiter.trackedAddresses == 3)
        // Full: the longest-idle entry makes room; the table never grows past its limit.
        _ = limiter.admit("10.0.0.1", now: 50)
        _ = limiter.admit("10.0.0.9", now: 60)
        #expect(limiter.trackedAddresses == 3)
        // Long idle (buckets full again): one sweep forgets them all.
        _ = limiter.admit("10.0.1.0", now: 10_000)
        #expect(limiter.trackedAddresses == 1)
    }

    @Test func busyAddressKeepsItsSpentBudgetWhileOthersCome() {
        let limiter = RequestRateByAddress(rate: rate(1, burst: 1), maxAddresses: 2)
        #expect(limiter.admit("a", now: 0))
        #expect(!limiter.admit("a", now: 10))
        _ = limiter.admit("b", now: 5)
        _ = limiter.admit("c", now: 20)  // evicts b, the longest idle; a was seen at 10
        #expect(!limiter.admit("a", now: 30), "a's spent budget was not reset")
    }
}
