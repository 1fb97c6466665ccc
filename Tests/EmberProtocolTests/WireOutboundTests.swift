import EmberTestSupport
import Testing

@testable import EmberProtocol

/// A connection's outbound backpressure (`WireOutbound`): the in-memory message bound, one flush
/// per turn, the byte bound over pending and in-flight bytes, and the slow-consumer cut-off — the
/// rules `RealtimeSession` drives, without a socket.
@Suite(.printsSeedOnFailure) struct WireOutboundTests {
    @Test func inMemoryTheMessageAfterTheBoundClosesAndTakingMakesRoom() {
        var o = WireOutbound(limits: .init(maxMessages: 3, maxBytes: 1_000))
        for _ in 0..<3 { #expect(o.offerMessage() == .queue(scheduleFlush: false)) }
        #expect(o.offerMessage() == .close(reason: "outbound queue over 3 messages: client too slow"))
        #expect(o.messages == 3)
        o.took(messages: 2)
        #expect(o.offerMessage() == .queue(scheduleFlush: false))
        #expect(o.messages == 2)
        // In memory nothing counts against the byte bound.
        #expect(o.queuedBytes == 0)
    }

    @Test func theFirstFrameAfterAFlushSchedulesTheNextOne() {
        var o = WireOutbound(limits: .init(maxMessages: 10, maxBytes: 1_000))
        #expect(o.offerMessage() == .queue(scheduleFlush: false))
        o.attached()
        #expect(o.messages == 0)
        #expect(o.offer(bytes: 10) == .queue(scheduleFlush: true))
        #expect(o.offer(bytes: 20) == .queue(scheduleFlush: false))
        #expect(o.take(endingFlushTurn: true) == 30)
        #expect(o.pendingBytes == 0 && o.inFlightBytes == 30 && !o.flushScheduled)
        // The next frame schedules a flush again; a write outside the turn (before a close
        // frame) takes the bytes but leaves the scheduled flush to come.
        #expect(o.offer(bytes: 5) == .queue(scheduleFlush: true))
        #expect(o.take(endingFlushTurn: false) == 5)
        #expect(o.flushScheduled)
        #expect(o.offer(bytes: 5) == .queue(scheduleFlush: false))
        #expect(o.take(endingFlushTurn: true) == 5)
        #expect(o.take(endingFlushTurn: true) == nil)
        o.written(30)
        #expect(o.queuedBytes == 10)
    }

    @Test func bytesInFlightCountUntilWrittenAndTheFirstOverTheBoundCutsOff() {
        var o = WireOutbound(limits: .init(maxMessages: 10, maxBytes: 100))
        o.attached()
        #expect(o.offer(bytes: 60) == .queue(scheduleFlush: true))
        #expect(o.take(endingFlushTurn: true) == 60)
        // Exactly at the bound is allowed.
        #expect(o.offer(bytes: 40) == .queue(scheduleFlush: true))
        o.written(60)
        #expect(o.offer(bytes: 60) == .queue(scheduleFlush: false))
        #expect(o.queuedBytes == 100)
        #expect(o.offer(bytes: 1) == .cutOff(reason: "outbound queue over 100 bytes: client not reading (slow consumer)"))
        #expect(o.isCutOff && o.pendingBytes == 0)
        // Nothing is queued or taken after the cut-off.
        #expect(o.offer(bytes: 1) == .drop)
        #expect(o.take(endingFlushTurn: true) == nil)
    }

    /// Random offers, flushes and completed writes against a model: the bytes the client has not
    /// read never pass the bound, every flush writes exactly what was queued since the last, and
    /// the cut-off comes at the first offer that would pass it.
    @Test func randomTrafficKeepsTheBoundAndTheAccounts() {
        var rng = TestSeed.generator(0x0b7b_0c5e)
        for _ in 0..<200 {
            let bound = 1 + rng.below(5_000)
            var o = WireOutbound(limits: .init(maxMessages: 1, maxBytes: bound))
            o.attached()
            var pending = 0, writes: [Int] = [], scheduled = false
            for _ in 0..<300 {
                switch rng.below(3) {
                case 0:
                    let n = WireOutbound.frameSize(payload: rng.below(400))
                    let unread = pending + writes.reduce(0, +)
                    let answer = o.offer(bytes: n)
                    if unread + n > bound {
                        guard case .cutOff = answer else { Issue.record("over the bound at \(unread + n) of \(bound) but \(answer)"); return }
                        #expect(o.offer(bytes: 1) == .drop)
                        break
                    }
                    #expect(answer == .queue(scheduleFlush: !scheduled))
                    scheduled = true
                    pending += n
                case 1:
                    let taken = o.take(endingFlushTurn: true)
                    scheduled = false
                    #expect(taken == (pending > 0 ? pending : nil))
                    if let taken { writes.append(taken) }
                    pending = 0
                default:
                    if !writes.isEmpty { o.written(writes.removeFirst()) }
                }
                if o.isCutOff { break }
                #expect(o.queuedBytes == pending + writes.reduce(0, +))
                #expect(o.queuedBytes <= bound)
            }
        }
    }

    @Test func aServerFrameIsItsPayloadAndTheLengthForm() {
        #expect(WireOutbound.frameSize(payload: 0) == 2)
        #expect(WireOutbound.frameSize(payload: 125) == 127)
        #expect(WireOutbound.frameSize(payload: 126) == 130)
        #expect(WireOutbound.frameSize(payload: 65_535) == 65_539)
        #expect(WireOutbound.frameSize(payload: 65_536) == 65_546)
    }
}
