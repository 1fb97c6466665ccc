import EmberCore
import EmberTestSupport
import Testing

@testable import EmberProtocol

/// A connection's inbound requests: arrival order, one handler at a time, backpressure on the
/// socket and a teardown after the last request — the rules `WireConnection` drives, without one.
@Suite(.printsSeedOnFailure) struct WireRequestQueueTests {
    @Test func oneHandlerRunsWhileRequestsAreQueued() {
        var q = WireRequestQueue<Int>(maxQueued: 8)
        #expect(q.isIdle)
        #expect(q.arrive(1, handlerReady: true) == .init(startHandler: true, pauseReading: false))
        // A handler runs: the next arrival starts none, and the reader may not handle one itself.
        #expect(q.arrive(2, handlerReady: true) == .init(startHandler: false, pauseReading: false))
        #expect(!q.isIdle)
        guard case .handle(1, false) = q.next(), case .handle(2, false) = q.next() else { Issue.record("out of order"); return }
        guard case .stop(tearDown: false) = q.next() else { Issue.record("expected the handler to stop"); return }
        #expect(q.isIdle)
        #expect(q.arrive(3, handlerReady: true).startHandler)
    }

    @Test func messagesBeforeTheSessionOpensWaitForIt() {
        var q = WireRequestQueue<Int>(maxQueued: 8)
        #expect(q.startIfQueued() == false)
        #expect(q.arrive(1, handlerReady: false) == .init(startHandler: false, pauseReading: false))
        #expect(q.startIfQueued() == true)
        // Started once.
        #expect(q.startIfQueued() == false)
        guard case .handle(1, _) = q.next() else { Issue.record("the waiting message is handled"); return }
    }

    @Test func readingPausesAtTheLimitAndResumesAtHalf() {
        var q = WireRequestQueue<Int>(maxQueued: 4)
        var pauses = 0
        for i in 0..<6 where q.arrive(i, handlerReady: true).pauseReading { pauses += 1 }
        // Paused once, when the fourth arrived (a reader that keeps reading meanwhile is not paused again).
        #expect(pauses == 1 && q.paused)
        var resumedAfter: [Int] = []
        while case .handle(let m, let resume) = q.next() {
            if resume { resumedAfter.append(m) }
        }
        // Six queued: resumed when the queue is down to two, after the fourth message was taken.
        #expect(resumedAfter == [3])
        #expect(!q.paused)
    }

    @Test func aClosedSocketIsTornDownOnceAfterTheLastRequest() {
        var idle = WireRequestQueue<Int>(maxQueued: 4)
        #expect(idle.socketClosed() == true)
        #expect(idle.socketClosed() == false)

        var busy = WireRequestQueue<Int>(maxQueued: 4)
        _ = busy.arrive(1, handlerReady: true)
        // The handler runs: it tears down after its last message, not the reader.
        #expect(busy.socketClosed() == false)
        guard case .handle(1, _) = busy.next() else { Issue.record("the queued request is still handled"); return }
        guard case .stop(tearDown: true) = busy.next() else { Issue.record("the handler tears down"); return }
        guard case .stop(tearDown: false) = busy.next() else { Issue.record("torn down once"); return }
    }

    /// Seeded: arrivals, handler steps and a close interleaved at random. Every message is handled
    /// once, in arrival order; the socket is paused whenever `maxQueued` are queued and resumed
    /// once the queue is down to half; the teardown happens exactly once, after the last message.
    @Test func randomInterleavingsKeepOrderBackpressureAndOneTeardown() {
        var rng = TestSeed.generator(0x9e0e)
        for _ in 0..<300 {
            let limit = 2 + rng.below(10)
            var q = WireRequestQueue<Int>(maxQueued: limit)
            var sent = 0, handled: [Int] = [], paused = false, handlerRunning = false, tearDowns = 0, closed = false
            for _ in 0..<400 {
                if !closed, !paused, rng.chance(0.55) {
                    let a = q.arrive(sent, handlerReady: true)
                    sent += 1
                    if a.pauseReading { #expect(!paused); paused = true }
                    if a.startHandler { #expect(!handlerRunning); handlerRunning = true }
                    #expect(q.count < limit || paused, "a full queue pauses reading")
                } else if handlerRunning {
                    switch q.next() {
                    case .handle(let m, let resume):
                        handled.append(m)
                        if resume { #expect(paused && q.count <= limit / 2); paused = false }
                    case .stop(let tearDown):
                        handlerRunning = false
                        if tearDown { tearDowns += 1 }
                    }
                } else if !closed, rng.chance(0.02) {
                    closed = true
                    if q.socketClosed() { tearDowns += 1 }
                }
            }
            if !closed, q.socketClosed() { tearDowns += 1 }
            while handlerRunning {
                switch q.next() {
                case .handle(let m, _): handled.append(m)
                case .stop(let tearDown):
                    handlerRunning = false
                    if tearDown { tearDowns += 1 }
                }
            }
            #expect(handled == Array(0..<sent))
            #expect(tearDowns == 1)
        }
    }
}
