import Foundation
import HTTPTypes
import Logging
import Testing

@testable import EmberServer

/// The driver of a member's catch-up gate (`NodeCatchUp`) with a barrier the test controls:
/// held waits end when the barrier returns, refusals past the limits carry the REST text.
@Suite struct NodeCatchUpTests {
    /// Polls `cond` (an event the driver publishes), failing after 10 s.
    func until(_ what: String, _ cond: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !cond() {
            guard ContinuousClock.now < deadline else { throw CancellationError() }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    @Test func heldWaitsProceedOnceTheBarrierReturnsAndTheGateStaysOpen() async throws {
        let (opened, open) = AsyncStream<Void>.makeStream()
        let c = NodeCatchUp.catchingUp(limits: .init(maxHeld: 2, maxWaitMillis: 60_000), barrier: {
            for await _ in opened { return }
        }, logger: Logger(label: "test"))
        defer { c.stop() }
        #expect(!c.isCaughtUp)
        async let a: Void = c.wait()
        async let b: Void = c.wait()
        try await until("two held") { c.heldCount == 2 }
        // A third is over the limit: refused at once, with the REST error's text.
        do {
            try await c.wait()
            Issue.record("a wait past maxHeld was admitted")
        } catch let e as CatchingUp {
            #expect(e.message.hasPrefix("this node is catching up: ") && e.message.contains("2 requests"))
            #expect(RestAnswer.error(e).status.code == 503)
            #expect(RestAnswer.error(e).headers[.retryAfter] == "1")
        }
        #expect(!c.isCaughtUp, "nothing opens the gate but the barrier")
        open.yield(())
        try await a
        try await b
        #expect(c.isCaughtUp && c.heldCount == 0)
        try await c.wait()
    }

    @Test func aHeldWaitIsRefusedOnceItWaitedItsLimit() async throws {
        let c = NodeCatchUp.catchingUp(limits: .init(maxHeld: 10, maxWaitMillis: 200), barrier: {
            try await Task.sleep(for: .seconds(3600))
        }, logger: Logger(label: "test"))
        defer { c.stop() }
        let start = ContinuousClock.now
        do {
            try await c.wait()
            Issue.record("a wait with no catch-up ended without an error")
        } catch let e as CatchingUp {
            #expect(e.message.contains("within 200 ms"))
        }
        #expect(ContinuousClock.now - start >= .milliseconds(200))
        #expect(c.heldCount == 0 && !c.isCaughtUp)
    }

    @Test func aCancelledWaitLeavesItsSlot() async throws {
        let c = NodeCatchUp.catchingUp(limits: .init(maxHeld: 1, maxWaitMillis: 60_000), barrier: {
            try await Task.sleep(for: .seconds(3600))
        }, logger: Logger(label: "test"))
        defer { c.stop() }
        let waiter = Task { try await c.wait() }
        try await until("held") { c.heldCount == 1 }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        #expect(c.heldCount == 0)
    }

    @Test func aSingleNodeNeverHolds() async throws {
        let c = NodeCatchUp.caughtUp()
        #expect(c.isCaughtUp)
        try await c.wait()
        #expect(c.heldCount == 0)
    }
}
