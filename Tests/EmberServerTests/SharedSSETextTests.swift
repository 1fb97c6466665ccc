import EmberCore
import Testing

@testable import EmberCluster
@testable import EmberNodeStore
@testable import EmberServer

/// SSE fan-out builds each event's text once per listened location; every stream still gets
/// exactly the text built for it alone (`ChangeRouting`), and only the events of its location.
@Suite struct SharedSSETextTests {
    func p(_ s: String) -> Path { try! Path(s) }
    func n(_ s: String) -> Node { try! Node(json: JSON.parse(s)) }

    @Test func streamsOnOneLocationShareTextAndDeepStreamsGetOnlyTheirEvents() async throws {
        let hub = StreamHub()
        let paths = ["", "", "a/b", "a/b", "a", "x"]
        let streams = try paths.map { try #require(hub.register(namespace: "ns", path: p($0))) }
        let changes: [CommittedChange] = [
            CommittedChange(index: 1, namespace: "ns", path: p("a/b/c"), kind: .set(n("1"))),
            CommittedChange(index: 2, namespace: "ns", path: .root, kind: .merge([(p("a/b"), n(#"{"c":2}"#)), (p("x"), n("3"))])),
            CommittedChange(index: 3, namespace: "ns", path: p("x/y"), kind: .set(n("null"))),
            CommittedChange(index: 4, namespace: "other", path: .root, kind: .set(n("1"))),
        ]
        for c in changes { hub.publish(c) }
        hub.closeAll()
        var got: [[(UInt64, String)]] = []
        for s in streams {
            var out: [(UInt64, String)] = []
            for await e in s.events { out.append(e) }
            got.append(out)
        }
        for (i, path) in paths.enumerated() {
            let expected = changes.filter { $0.namespace == "ns" }.flatMap { c in
                ChangeRouting.events(for: c, at: p(path)).map { (c.index, ChangeRouting.sseText($0)) }
            }
            #expect(got[i].map(\.0) == expected.map(\.0), "stream at /\(path)")
            #expect(got[i].map(\.1) == expected.map(\.1), "stream at /\(path)")
        }
        #expect(got[0].map(\.1) == got[1].map(\.1))
        // The deep stream: entries 1 and 2 only; the root stream: all three of its namespace.
        #expect(got[2].map(\.0) == [1, 2])
        #expect(got[0].map(\.0) == [1, 2, 3])
        #expect(got[5].map(\.0) == [2, 3])
    }
}
