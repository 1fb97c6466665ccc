import EmberCore
import EmberProtocol
import Testing

@testable import EmberCluster
@testable import EmberNodeStore
@testable import EmberServer

/// Encode once, send many: the frames a publish shares between listens are byte for byte the
/// frames each listen built for itself before (`WireListen.apply`, serialised and split), and
/// each listen gets exactly the events of its location.
@Suite struct SharedFramesTests {
    func p(_ s: String) -> Path { try! Path(s) }
    func n(_ s: String) -> Node { try! Node(json: JSON.parse(s)) }

    struct Listener {
        let path: String
        let queryWire: JSON?
        let tag: Int64?
    }

    /// All frames queued on `session`, ending it (nil once drained).
    func frames(_ session: RealtimeSession) async -> [String] {
        session.finish(reason: nil)
        var out: [String] = []
        while let batch = await session.nextFrames() { out += batch }
        return out
    }

    @Test func sharedFramesMatchPerListenFramesAndEachListenGetsItsOwnEvents() async throws {
        let initial = n(#"{"a":{"b":{"c":1},"s":{"x":1,"y":5,"z":9}},"other":3}"#)
        // orderByValue, limitToLast 2 on /a/s: a window where a child leaves and another enters.
        let window: JSON = .object(["i": .string(".value"), "l": .int(2), "vf": .string("r")])
        let listeners: [Listener] = [
            Listener(path: "", queryWire: nil, tag: nil),
            Listener(path: "", queryWire: nil, tag: nil),
            Listener(path: "a/b/c", queryWire: nil, tag: nil),
            Listener(path: "a/b/c", queryWire: nil, tag: nil),
            Listener(path: "a", queryWire: nil, tag: nil),
            Listener(path: "a/s", queryWire: window, tag: 7),
            Listener(path: "a/s", queryWire: window, tag: 8),
            Listener(path: "other", queryWire: nil, tag: nil),
        ]
        let changes: [CommittedChange] = [
            CommittedChange(index: 2, namespace: "ns", path: p("a/b/c"), kind: .set(n("2"))),
            CommittedChange(index: 3, namespace: "ns", path: p("other"), kind: .set(n(#"{"k":"v"}"#))),
            // The window {y, z} becomes {z, w}: y leaves (y < x now) and w enters.
            CommittedChange(index: 4, namespace: "ns", path: p("a/s"), kind: .merge([(p("y"), n("0")), (p("w"), n("20"))])),
            CommittedChange(index: 5, namespace: "ns", path: .root, kind: .merge([(p("a/b"), n(#"{"c":3,"d":4}"#)), (p("other"), n("null"))])),
            CommittedChange(index: 6, namespace: "ns", path: p("a/b/c/deeper"), kind: .set(n("true"))),
            // Another namespace: none of these listens hears of it.
            CommittedChange(index: 7, namespace: "elsewhere", path: .root, kind: .set(n("1"))),
        ]

        let hub = RealtimeHub()
        var sessions: [RealtimeSession] = []
        var reference: [WireListen] = []
        var expected: [[String]] = []
        for (i, l) in listeners.enumerated() {
            let s = try #require(hub.open(id: "s\(i)", namespace: "ns"))
            let query = try l.queryWire.map { try QuerySpec(wire: $0) } ?? .default
            let read = ReadResult(node: initial.child(at: p(l.path)), version: 1, appliedIndex: 1)
            #expect(started(s.beginListen(r: 1, listen(p(l.path), query, l.queryWire, l.tag))))
            s.listenRead(r: 1, listen(p(l.path), .default, l.queryWire, l.tag), indexed: true, read: read)
            sessions.append(s)
            // The per-listen path as it was: JSON messages serialised and split one listen at a time.
            var r = WireListen(path: p(l.path), query: query, queryWire: l.queryWire, tag: l.tag)
            var out = r.activate(with: read).flatMap { WireFraming.split($0.serialized()) }
            out += WireFraming.split(WireMessages.response(1, status: "ok", data: .object([:])).serialized())
            reference.append(r)
            expected.append(out)
        }
        for change in changes {
            hub.publish(change)
            guard change.namespace == "ns" else { continue }
            for i in reference.indices {
                expected[i] += reference[i].apply(change).flatMap { WireFraming.split($0.serialized()) }
            }
        }
        var got: [[String]] = []
        for s in sessions { got.append(await frames(s)) }
        #expect(got == expected)

        // Listens on the same location got the same bytes; tags differ only in the tag.
        #expect(got[0] == got[1])
        #expect(got[2] == got[3])
        #expect(got[5].map { $0.replacingOccurrences(of: #""t":7"#, with: #""t":8"#) } == got[6])
        // The deep listen got exactly its events: initial data, ok, then entries 2, 5 and 6.
        let deep = got[2].map { try! JSON.parse($0) }
        let versions = deep.compactMap { $0.objectValue?["d"]?.objectValue?["b"]?.objectValue?["v"] }
        #expect(versions == [.int(1), .int(2), .int(5), .int(6)])
        #expect(deep.count == 5)
        // The root listen got every change of the namespace.
        let root = got[0].map { try! JSON.parse($0) }
        let rootVersions = root.compactMap { $0.objectValue?["d"]?.objectValue?["b"]?.objectValue?["v"] }
        #expect(rootVersions == [.int(1), .int(2), .int(3), .int(4), .int(5), .int(6)])
        // The window listen: y removed (null) and w added in the same message, in order.
        let tagged = got[5].map { try! JSON.parse($0) }
        let windowBodies = tagged.compactMap { $0.objectValue?["d"]?.objectValue }
            .filter { $0["a"] == .string("m") }.compactMap { $0["b"]?.objectValue }
        #expect(windowBodies.first?["d"] == .object(["y": .null, "w": .int(20)]))
    }
}
