import Testing

@testable import EmberRaft

/// The follower side of batched forwarding (shared by the cluster runtime and the simulator).
@Suite struct ForwardQueueTests {
    typealias Q = ForwardQueue<Int, Int>

    func queue(_ n: Int) -> Q {
        var q = Q()
        for i in 0..<n { q.enqueue(i) }
        return q
    }

    @Test func batchesTakeTheHeadWithinBothLimitsOneAtATime() {
        var q = queue(10)
        let b = q.nextBatch(to: "n1", now: 0, deadline: 5, maxWrites: 4, maxBytes: 1_000) { _ in 100 }!
        #expect(b.writes == [0, 1, 2, 3] && b.to == "n1")
        #expect(q.nextBatch(to: "n1", now: 0, deadline: 5, maxWrites: 4, maxBytes: 1_000) { _ in 100 } == nil,
                "a second batch waits for the first's answer")
        _ = q.answered(batch: b.id, from: "n1", results: (0..<4).map { .accepted(index: UInt64(10 + $0), term: 2) })
        #expect(q.nextBatch(to: "n1", now: 0, deadline: 5, maxWrites: 100, maxBytes: 250) { _ in 100 }!.writes == [4, 5])
        _ = q.expire(now: 5)
        // A write larger than the byte limit still goes, alone.
        #expect(q.nextBatch(to: "n1", now: 6, deadline: 9, maxWrites: 100, maxBytes: 1) { _ in 100 }!.writes == [6])
        #expect(Array(q.waiting) == [7, 8, 9])
    }

    @Test func aBouncedSuffixReturnsAheadOfLaterWritesAndAcceptedOnesAreSettled() {
        var q = queue(6)
        let b = q.nextBatch(to: "n1", now: 0, deadline: 5, maxWrites: 4, maxBytes: 100) { _ in 1 }!
        q.enqueue(6)
        #expect(q.answered(batch: b.id + 1, from: "n1", results: []) == nil, "an answer to another batch is ignored")
        let a = q.answered(batch: b.id, from: "n1",
                           results: [.accepted(index: 7, term: 3), .refused("bad"), .notLeader(hint: "n2"), .notLeader(hint: "n2")])!
        #expect(a.accepted.map(\.write) == [0] && a.accepted[0].index == 7 && a.refused.map(\.write) == [1])
        #expect(a.bounced?.hint == "n2" && a.bounced?.by == "n1")
        #expect(q.inFlight == nil)
        #expect(Array(q.waiting) == [2, 3, 4, 5, 6])
    }

    @Test func aShortAnswerLeavesTheRestUnknownAndExpiryReturnsTheBatch() {
        var q = queue(3)
        let b = q.nextBatch(to: "n1", now: 0, deadline: 5, maxWrites: 3, maxBytes: 100) { _ in 1 }!
        let a = q.answered(batch: b.id, from: "n1", results: [.accepted(index: 1, term: 1)])!
        #expect(a.unanswered == [1, 2])
        var r = queue(2)
        _ = r.nextBatch(to: "n1", now: 0, deadline: 5, maxWrites: 3, maxBytes: 100) { _ in 1 }
        #expect(r.expire(now: 4).isEmpty)
        #expect(r.expire(now: 5) == [0, 1] && r.inFlight == nil)
    }

    @Test func pauseHoldsTheNextBatchAndRemovalKeepsOrder() {
        var q = queue(5)
        q.pausedUntil = 10
        #expect(q.nextBatch(to: "n1", now: 9, deadline: 20, maxWrites: 9, maxBytes: 99) { _ in 1 } == nil)
        #expect(q.removeAll { $0 % 2 == 1 } == [1, 3])
        #expect(q.nextBatch(to: "n1", now: 10, deadline: 20, maxWrites: 9, maxBytes: 99) { _ in 1 }!.writes == [0, 2, 4])
        q.enqueue(7)
        #expect(q.drain() == [0, 2, 4, 7] && q.isEmpty && q.inFlight == nil)
    }

    @Test func manyPopsStayInOrder() {
        var q = Q()
        var expected = 0
        for i in 0..<1_000 {
            q.enqueue(i)
            if i % 3 == 2 {
                #expect(q.removeFirst() == expected)
                expected += 1
            }
        }
        #expect(Array(q.waiting) == Array(expected..<1_000))
    }

    /// A write stands for its payload (a bulk import's are MBs): once it leaves the queue (taken
    /// by a leader, sent in a batch and answered, expired, drained) the queue holds no reference
    /// to it. The consumed prefix kept up to 64 taken writes alive (issue 42: a node importing
    /// held every chunk of a 64 MB import).
    @Test func writesThatLeftTheQueueAreNotKeptAlive() {
        final class Payload { let n: Int; init(_ n: Int) { self.n = n } }
        var q = ForwardQueue<Payload, Int>()
        var gone: [() -> Bool] = []
        func add(_ n: Int) {
            let p = Payload(n)
            gone.append { [weak p] in p == nil }
            q.enqueue(p)
        }
        // A leader taking writes one at a time while more keep arriving (never empty).
        add(0)
        for i in 1..<200 {
            add(i)
            #expect(q.removeFirst().n == i - 1)
        }
        #expect(gone.prefix(199).allSatisfy { $0() }, "taken writes are released")
        #expect(!gone[199](), "the waiting write is kept")
        // A follower's batches: answered, expired.
        for i in 200..<210 { add(i) }
        let id = q.nextBatch(to: "n1", now: 0, deadline: 5, maxWrites: 4, maxBytes: 1 << 30) { _ in 1 }!.id
        _ = q.answered(batch: id, from: "n1", results: (0..<4).map { .accepted(index: UInt64($0), term: 1) })
        _ = q.nextBatch(to: "n1", now: 1, deadline: 5, maxWrites: 4, maxBytes: 1 << 30) { _ in 1 }
        #expect(q.expire(now: 5).count == 4)
        #expect(gone.prefix(207).allSatisfy { $0() }, "sent and settled writes are released")
        #expect(q.count == 3 && !gone[207]())
        _ = q.drain()
        #expect(gone.allSatisfy { $0() })
    }
}
