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
        #expect(started(session.beginListen(r: 1, listen(p("scores"), try QuerySpec(wire: qw), qw, 1))))
        session.listenRead(r: 1, listen(p("scores"), .default, qw, 1), indexed: true, read: ReadResult(node: scores, version: 4, appliedIndex: 4))
        // A parent listen begins; its read (index 4) happens, then entry 5 commits and is delivered
        // before the listen completes.
        #expect(started(session.beginListen(r: 1, listen(.root, .default, nil, nil))))
        let read = ReadResult(node: Node(children: ["scores": scores]), version: 4, appliedIndex: 4)
        session.deliver(CommittedChange(index: 5, namespace: "ns", path: p("scores/trex"), kind: .set(n("100"))))
        session.listenRead(r: 2, listen(.root, .default, nil, nil), indexed: true, read: read)
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
        #expect(started(session.beginListen(r: 1, listen(p("c"), .default, nil, nil))))
        // Entry 7 is both in the read and delivered meanwhile: one message with the value.
        session.deliver(CommittedChange(index: 7, namespace: "ns", path: p("c"), kind: .merge([(p("x"), n("1"))])))
        session.listenRead(r: 1, listen(p("c"), .default, nil, nil), indexed: true, read: ReadResult(node: n(#"{"x":1,"y":2}"#), version: 7, appliedIndex: 7))
        let messages = await drain(session, 2)
        #expect(body(messages[0])["d"] == .object(["x": .int(1), "y": .int(2)]))
        #expect(messages[1].objectValue?["d"]?.objectValue?["r"] == .int(1))
    }
}
