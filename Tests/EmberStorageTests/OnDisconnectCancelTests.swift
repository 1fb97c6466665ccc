import EmberCore
import Testing
@testable import EmberStorage

@Suite struct OnDisconnectCancelTests {
    func p(_ s: String) -> Path { try! Path(s) }

    @Test func cancelDropsWritesAtOrBelowAndSplitsWritesAbove() throws {
        let ops: [WriteOperation] = [
            .set(path: p("a/b"), value: .int(1)),
            .set(path: p("x"), value: .object(["keep": .int(1), "gone": .object(["c": .int(2), "d": .int(3)])])),
            .update(path: p("u"), values: [(p("state"), .string("off")), (p("gone"), .bool(true))]),
            .set(path: p("leaf"), value: .int(5)),
        ]
        let afterA = OnDisconnectCancel.apply(ops, cancel: p("a"))
        #expect(afterA.count == 4 && afterA[0] == nil && afterA.compactMap { $0 }.count == 3)
        let afterX = OnDisconnectCancel.apply(ops, cancel: p("x/gone/c"))
        guard case .update(let xp, let parts, nil)? = afterX[1] else { Issue.record("not split"); return }
        #expect(xp == p("x"))
        #expect(parts.map { $0.0.description } == ["/gone/d", "/keep"])
        let afterU = OnDisconnectCancel.apply(ops, cancel: p("u/gone"))
        guard case .update(_, let uparts, _)? = afterU[2] else { Issue.record("update lost"); return }
        #expect(uparts.map { $0.0.description } == ["/state"])
        // A leaf's child cannot be cancelled: the set stays.
        let afterLeaf = OnDisconnectCancel.apply(ops, cancel: p("leaf/z"))
        #expect(afterLeaf[3] == ops[3])
        #expect(OnDisconnectCancel.apply([.update(path: p("u"), values: [(p("gone"), .bool(true))])], cancel: p("u/gone")) == [nil])
        // Cancelling above every write drops them all.
        #expect(OnDisconnectCancel.apply(ops, cancel: .root).allSatisfy { $0 == nil })
    }
}
