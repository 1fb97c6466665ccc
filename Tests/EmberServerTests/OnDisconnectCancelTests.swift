import EmberCore
import Testing
@testable import EmberCluster
@testable import EmberNodeStore
@testable import EmberServer

@Suite struct OnDisconnectCancelTests {
    func p(_ s: String) -> Path { try! Path(s) }

    @Test func cancelDropsWritesAtOrBelowAndSplitsWritesAbove() throws {
        let ops: [(Path, WriteRequest.Kind)] = [
            (p("a/b"), .set(.int(1))),
            (p("x"), .set(.object(["keep": .int(1), "gone": .object(["c": .int(2), "d": .int(3)])]))),
            (p("u"), .update([(p("state"), .string("off")), (p("gone"), .bool(true))])),
            (p("leaf"), .set(.int(5))),
        ]
        let afterA = OnDisconnectCancel.apply(ops, cancel: p("a"))
        #expect(afterA.count == 3)
        let afterX = OnDisconnectCancel.apply(ops, cancel: p("x/gone/c"))
        guard case .update(let parts) = afterX[1].1 else { Issue.record("not split"); return }
        #expect(parts.map { $0.0.description } == ["/gone/d", "/keep"])
        let afterU = OnDisconnectCancel.apply(ops, cancel: p("u/gone"))
        guard case .update(let uparts) = afterU[2].1 else { Issue.record("update lost"); return }
        #expect(uparts.map { $0.0.description } == ["/state"])
        // A leaf's child cannot be cancelled: the set stays.
        let afterLeaf = OnDisconnectCancel.apply(ops, cancel: p("leaf/z"))
        guard case .set(.int(5)) = afterLeaf[3].1 else { Issue.record("leaf changed"); return }
        #expect(OnDisconnectCancel.apply([(p("u"), .update([(p("gone"), .bool(true))]))], cancel: p("u/gone")).isEmpty)
    }
}
