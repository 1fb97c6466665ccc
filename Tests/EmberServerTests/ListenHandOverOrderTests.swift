import EmberCore
import Testing

@testable import EmberCluster
@testable import EmberNodeStore
@testable import EmberServer

/// Messages on one connection never go back in time: a listen's initial data includes the changes
/// that other listens of the connection already pushed while its read ran (the race behind the
/// flaky `DinosaurQueryTests.filteredQuerySurvivesParentListenHandOver`).
@Suite struct ListenHandOverOrderTests {
    func p(_ s: String) -> Path { try! Path(s) }
    func n(_ s: String) -> Node { try! Node(json: JSON.parse(s)) }


    func body(_ m: JSON) -> KeyMap<JSON> { m.objectValue!["d"]!.objectValue!["b"]!.objectValue! }

    @Test func initialDataIncludesChangesPushedMeanwhileToOtherListens() async throws {
        let session = RealtimeSession(id: "s", namespace: "ns", limits: .init())
        let scores = n(#"{"pterodactyl":93,"stegosaurus":5}"#)
        // A tagged query on /scores (orderByValue, limitToLast 1) is active.
        let qw: JSON = .object(["i": .string(".value"), "l": .int(1), "vf": .string("r")])
        #expect(session.beginListen(path: p("scores"), query: try QuerySpec(wire: qw), queryWire: qw, tag: 1) == .started)
        session.completeListen(path: p("scores"), queryWire: qw, tag: 1,
                               read: ReadResult(node: scores, version: 4, appliedIndex: 4),
                               response: WireMessages.response(1, status: "ok", data: .object([:])))
        // A parent listen begins; its read (index 4) happens, then entry 5 commits and is delivered
        // before the listen completes.
        #expect(session.beginListen(path: .root, query: .default, queryWire: nil, tag: nil) == .started)
        let read = ReadResult(node: Node(children: ["scores": scores]), version: 4, appliedIndex: 4)
        session.deliver(CommittedChange(index: 5, namespace: "ns", path: p("scores/trex"), kind: .set(n("100"))))
        session.completeListen(path: .root, queryWire: nil, tag: nil, read: read,
                               response: WireMessages.response(2, status: "ok", data: .object([:])))
        let messages = await drain(session, 5)
        // Tagged initial data, ok, the tagged update for entry 5, the parent's data, ok.
        #expect(body(messages[2])["t"] == .int(1))
        #expect(body(messages[2])["d"] == .object(["pterodactyl": .null, "trex": .int(100)]))
        let parent = body(messages[3])
        #expect(parent["p"] == .string(""))
        #expect(parent["v"] == .int(5))
        // The parent's initial data already has entry 5: nothing older follows something newer.
        #expect(parent["d"]?.objectValue?["scores"]?.objectValue?["trex"] == .int(100))
        #expect(messages[4].objectValue?["d"]?.objectValue?["r"] == .int(2))
    }

    @Test func changesAlreadyInTheReadAreNotAppliedTwice() async throws {
        let session = RealtimeSession(id: "s", namespace: "ns", limits: .init())
        #expect(session.beginListen(path: p("c"), query: .default, queryWire: nil, tag: nil) == .started)
        // Entry 7 is both in the read and delivered meanwhile: one message with the value.
        session.deliver(CommittedChange(index: 7, namespace: "ns", path: p("c"), kind: .merge([(p("x"), n("1"))])))
        session.completeListen(path: p("c"), queryWire: nil, tag: nil,
                               read: ReadResult(node: n(#"{"x":1,"y":2}"#), version: 7, appliedIndex: 7),
                               response: WireMessages.response(1, status: "ok", data: .object([:])))
        let messages = await drain(session, 2)
        #expect(body(messages[0])["d"] == .object(["x": .int(1), "y": .int(2)]))
        #expect(messages[1].objectValue?["d"]?.objectValue?["r"] == .int(1))
    }
}
