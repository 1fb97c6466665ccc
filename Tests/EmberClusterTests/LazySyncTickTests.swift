import Testing

@testable import EmberCluster

/// A tick's part in a learner's lazily synced commits (`RaftHost.lazySyncTick`): the interval's
/// sync is queued only while the store owes one, and the interval counts from the first tick
/// that found something owed, so a voter, or a learner with nothing unsynced, wakes no writer.
@Suite struct LazySyncTickTests {
    static let interval = Duration.milliseconds(1_000)
    static let t0 = ContinuousClock.now

    @Test func nothingOwedQueuesNothingAndRestartsTheInterval() {
        var last = Self.t0
        for k in 1...50 {
            let now = Self.t0 + .milliseconds(100 * k)
            let (due, next) = RaftHost.lazySyncTick(owed: false, now: now, last: last, interval: Self.interval)
            #expect(!due, "nothing owed: no writer job at tick \(k)")
            #expect(next == now)
            last = next
        }
    }

    @Test func anOwedSyncIsQueuedOneIntervalAfterItBecameOwed() {
        // Idle for a long time, then something is owed: not queued at once.
        var last = Self.t0
        var (due, next) = RaftHost.lazySyncTick(owed: false, now: Self.t0 + .seconds(30), last: last, interval: Self.interval)
        #expect(!due)
        last = next
        var queued: [Int] = []
        for k in 1...25 {
            (due, next) = RaftHost.lazySyncTick(owed: true, now: Self.t0 + .seconds(30) + .milliseconds(100 * k), last: last,
                                                interval: Self.interval)
            if due { queued.append(k) }
            last = next
        }
        #expect(queued == [10, 20], "one sync per interval while owed, the first an interval after the idle tick")
    }
}
