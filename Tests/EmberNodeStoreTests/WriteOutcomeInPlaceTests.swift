import EmberCore
import Testing
@testable import EmberNodeStore

/// `WriteOutcome.value` is computed (built from a `TextPatch` when the apply built no node), as
/// `WriteResult.value` is: a change made in place starts from the patch's value once, and keeps
/// the node's storage instead of copying it through a get and a set.
@Suite struct WriteOutcomeInPlaceTests {
    @Test func aChangeMadeInPlaceOverATextPatchStartsFromItsValue() throws {
        let body = Array(#"{"a":1,"b":{"c":"x"}}"#.utf8)
        let text = UpdateText(bytes: body, parts: [(try Path("a"), 5..<6), (try Path("b"), 11..<20)])
        var o = WriteOutcome(index: 3, valueFrom: TextPatch(text: text, base: Path.root, changed: [true, true]), version: 3)
        o.value.set(Node(.int(2)), at: try Path("d"))
        #expect(o.value.child(at: try Path("a")) == Node(.int(1)))
        #expect(o.value.child(at: try Path("b/c")) == Node(.string("x")))
        #expect(o.value.child(at: try Path("d")) == Node(.int(2)))
    }

    @Test func settingChildrenInPlaceKeepsTheValue() throws {
        var o = WriteOutcome(index: 1, applied: true, value: .empty, version: 1)
        for k in 0..<64 { o.value.set(Node(.int(Int64(k))), at: try Path("k\(k)")) }
        #expect(o.value.children.count == 64)
        #expect(o.value.child(at: try Path("k63")) == Node(.int(63)))
    }
}
