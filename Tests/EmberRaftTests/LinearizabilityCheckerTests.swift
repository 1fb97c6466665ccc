// The checker must accept linearizable histories and reject non-linearizable ones.

import EmberRaft
import EmberRaftSim
import Testing

private func op(_ id: Int, _ input: KVInput, _ output: KVOutput, _ call: Int, _ ret: Int?, key: String = "k") -> HistoryOperation {
    HistoryOperation(id: id, client: id, key: key, input: input, output: output, call: call, ret: ret)
}

@Suite struct LinearizabilityCheckerTests {
    @Test func sequentialHistoryIsLinearizable() {
        let h = [
            op(1, .put(1), .ok, 1, 2),
            op(2, .get, .value(1), 3, 4),
            op(3, .cas(expected: 1, new: 2), .casResult(true), 5, 6),
            op(4, .cas(expected: 1, new: 3), .casResult(false), 7, 8),
            op(5, .get, .value(2), 9, 10),
        ]
        #expect(LinearizabilityChecker.check(h) == .ok)
    }

    @Test func staleReadIsRejected() {
        let h = [
            op(1, .put(1), .ok, 1, 2),
            op(2, .put(2), .ok, 3, 4),
            op(3, .get, .value(1), 5, 6),  // after put(2) completed
        ]
        #expect(LinearizabilityChecker.check(h) == .illegal(key: "k"))
    }

    @Test func concurrentOperationsMayReorder() {
        let h = [
            op(1, .put(1), .ok, 1, 10),
            op(2, .put(2), .ok, 2, 9),
            op(3, .get, .value(1), 11, 12),  // put(2) then put(1) is a valid order
        ]
        #expect(LinearizabilityChecker.check(h) == .ok)
    }

    @Test func unknownOutcomesAreOptional() {
        let took = [op(1, .put(5), .unknown, 1, nil), op(2, .get, .value(5), 3, 4)]
        let didNot = [op(1, .put(5), .unknown, 1, nil), op(2, .get, .value(nil), 3, 4)]
        #expect(LinearizabilityChecker.check(took) == .ok)
        #expect(LinearizabilityChecker.check(didNot) == .ok)
        // But an unknown write cannot explain a value nobody wrote.
        let bogus = [op(1, .put(5), .unknown, 1, nil), op(2, .get, .value(6), 3, 4)]
        #expect(LinearizabilityChecker.check(bogus) == .illegal(key: "k"))
    }

    @Test func casMustObserveLatestValue() {
        let h = [
            op(1, .put(1), .ok, 1, 2),
            op(2, .put(2), .ok, 3, 4),
            op(3, .cas(expected: 1, new: 9), .casResult(true), 5, 6),
        ]
        #expect(LinearizabilityChecker.check(h) == .illegal(key: "k"))
    }

    @Test func keysAreCheckedIndependently() {
        let h = [
            op(1, .put(1), .ok, 1, 2, key: "a"),
            op(2, .put(1), .ok, 1, 2, key: "b"),
            op(3, .get, .value(1), 3, 4, key: "a"),
            op(4, .get, .value(nil), 3, 4, key: "b"),
        ]
        #expect(LinearizabilityChecker.check(h) == .illegal(key: "b"))
    }
}
