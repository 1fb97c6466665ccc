import EmberCore
import Testing

@testable import EmberCluster
@testable import EmberNodeStore
@testable import EmberServer

@Suite struct ChangeRoutingTests {
    func p(_ s: String) -> Path { try! Path(s) }
    func n(_ s: String) -> Node { try! Node(json: JSON.parse(s)) }

    @Test func setBelowAtAndAboveListener() {
        let set = CommittedChange(index: 1, namespace: "ns", path: p("a/b"), kind: .set(n(#"{"c":1}"#)))
        #expect(ChangeRouting.events(for: set, at: p("a")) == [.put(path: p("b"), data: n(#"{"c":1}"#))])
        #expect(ChangeRouting.events(for: set, at: p("a/b")) == [.put(path: .root, data: n(#"{"c":1}"#))])
        #expect(ChangeRouting.events(for: set, at: p("a/b/c")) == [.put(path: .root, data: n("1"))])
        #expect(ChangeRouting.events(for: set, at: p("a/b/zz")) == [.put(path: .root, data: .empty)])
        #expect(ChangeRouting.events(for: set, at: p("x")).isEmpty)
    }

    /// A streamed first event (head, the location's JSON, tail) is byte for byte the whole one.
    @Test func aStreamedRootPutIsTheWholeOnesBytes() {
        for json in [#"{"c":1,"b":[1,2,"x\n"]}"#, "null", #""s""#, "3.5"] {
            let node = n(json)
            let streamed = ChangeRouting.rootPutHead + node.toJSON().serialized() + ChangeRouting.rootPutTail
            #expect(streamed == ChangeRouting.sseText(.put(path: .root, data: node)))
        }
    }

    @Test func mergeAsPatchOrPuts() {
        let merge = CommittedChange(index: 2, namespace: "ns", path: p("a"),
                                    kind: .merge([(p("b/c"), n("1")), (p("d"), n(#"{"e":2}"#))]))
        #expect(ChangeRouting.events(for: merge, at: p("a")) == [.patch(path: .root, data: [(p("b/c"), n("1")), (p("d"), n(#"{"e":2}"#))])])
        #expect(ChangeRouting.events(for: merge, at: .root) == [.patch(path: p("a"), data: [(p("b/c"), n("1")), (p("d"), n(#"{"e":2}"#))])])
        #expect(ChangeRouting.events(for: merge, at: p("a/b")) == [.put(path: p("c"), data: n("1"))])
        #expect(ChangeRouting.events(for: merge, at: p("a/d/e")) == [.put(path: .root, data: n("2"))])
        #expect(ChangeRouting.events(for: merge, at: p("a/x")).isEmpty)
    }

    @Test func sseFraming() {
        let text = ChangeRouting.sseText(.patch(path: p("c"), data: [(p("foo"), n("3")), (p("baz/q"), n("4"))]))
        #expect(text == "event: patch\ndata: {\"data\":{\"baz/q\":4,\"foo\":3},\"path\":\"/c\"}\n\n")
        #expect(ChangeRouting.sseText(.put(path: .root, data: .empty)) == "event: put\ndata: {\"data\":null,\"path\":\"/\"}\n\n")
    }
}
