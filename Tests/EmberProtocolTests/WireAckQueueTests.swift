import EmberCore
import EmberTestSupport
import Testing

@testable import EmberProtocol

/// Pipelined writes are answered in request order, whatever order the store completes them in.
@Suite(.printsSeedOnFailure) struct WireAckQueueTests {
    func p(_ s: String) -> Path { try! Path(s) }

    func r(of frame: String) -> Int64? {
        guard case .response(let r, _, _)? = WireServerMessage.parse(frame) else { return nil }
        return r
    }

    @Test func answersLeaveInRequestOrder() {
        var q = WireAckQueue(limit: 10)
        let a = q.reserve(r: 1, path: p("a"))
        let b = q.reserve(r: 2, path: p("b"))
        let c = q.reserve(r: 3, path: p("c"))
        // The later writes complete first: nothing leaves until the first one does.
        #expect(q.complete([(c, .applied), (b, .stale)]).isEmpty)
        #expect(q.count == 3)
        let frames = q.complete([(a, .failed(.permissionDenied("Permission denied")))])
        #expect(frames.map { r(of: $0) } == [1, 2, 3])
        #expect(WireServerMessage.parse(frames[0]) == .response(r: 1, status: "permission_denied", data: .string("Permission denied")))
        #expect(WireServerMessage.parse(frames[1]) == .response(r: 2, status: "datastale", data: .string("The data at /b changed; retry the transaction")))
        #expect(WireServerMessage.parse(frames[2]) == .response(r: 3, status: "ok", data: .string("")))
        #expect(q.isEmpty)
        // A tag no longer queued is ignored.
        #expect(q.complete([(a, .applied)]).isEmpty)
    }

    @Test func theOkFrameIsTheResponseMessage() {
        for r: Int64 in [0, 7, 1 << 40] {
            // Prebuilt (its members in another order than the serializer's), the same message.
            #expect(WireServerMessage.parse(WireAckQueue.okFrame(r)) == .response(r: r, status: "ok", data: .string("")))
            #expect(WireAckQueue.frame(r: r, path: .root, .applied) == WireAckQueue.okFrame(r))
        }
    }

    @Test func theLimitIsTheRoomForUnansweredWrites() {
        var q = WireAckQueue(limit: 2)
        let a = q.reserve(r: 1, path: p("a"))
        _ = q.reserve(r: 2, path: p("a"))
        #expect(!q.hasRoom)
        #expect(q.complete([(a, .applied)]).count == 1)
        #expect(q.hasRoom && q.count == 1)
    }

    /// Seeded: completions in random order and batches; the frames always come out as the
    /// requests went in, each once.
    @Test func randomCompletionOrdersKeepRequestOrder() {
        var rng = TestSeed.generator(0xac45)
        for _ in 0..<200 {
            var q = WireAckQueue(limit: 64)
            var out: [Int64] = []
            var open: [UInt64] = []
            var nextR: Int64 = 1
            for _ in 0..<300 {
                if q.hasRoom, rng.next() % 3 != 0 {
                    open.append(q.reserve(r: nextR, path: .root))
                    nextR += 1
                } else if !open.isEmpty {
                    var batch: [(tag: UInt64, completion: WireAckQueue.Completion)] = []
                    for _ in 0...Int(rng.next() % 4) where !open.isEmpty {
                        let tag = open.remove(at: Int(rng.next() % UInt64(open.count)))
                        batch.append((tag, rng.next() % 5 == 0 ? .stale : .applied))
                    }
                    out += q.complete(batch).compactMap { r(of: $0) }
                }
            }
            out += q.complete(open.map { ($0, .applied) }).compactMap { r(of: $0) }
            #expect(out == Array(1..<nextR))
            #expect(q.isEmpty)
        }
    }
}
