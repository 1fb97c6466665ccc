import EmberTestSupport
import EmberCore
import EmberStorage
import Foundation
import Logging
import Testing

@testable import EmberCluster
@testable import EmberNodeStore
@testable import EmberServer

/// A follower installing a snapshot keeps its listeners: a real node over a real LMDB store gets
/// its state replaced by another store's snapshot (as `RaftHost.installStaged` does), then the
/// state-replaced handler resynchronises every SSE stream and WebSocket listen in place, ahead of
/// later changes.
@Suite struct ListenerResyncTests {
    static let ns = "resync"
    func p(_ s: String) -> Path { try! Path(s) }
    func n(_ s: String) -> Node { try! Node(json: JSON.parse(s)) }

    static func openStore(_ name: String) throws -> LMDBDataStore {
        var options = StoreOptions()
        options.mapSize = 1 << 28
        return try LMDBDataStore(directory: TestDirectory.root + "ember-resync-\(name)-\(UUID().uuidString)",
                                 options: options, logger: Logger(label: "test"))
    }

    func set(_ store: NodePorts, _ path: String, _ json: String) async throws {
        _ = try await store.writer.write(WriteRequest(namespace: Self.ns, path: p(path), kind: .set(try JSON.parse(json)),
                                               identity: .admin))
    }

    /// The next `count` messages queued on the session, parsed.
    func drain(_ session: RealtimeSession, _ count: Int) async -> [JSON] {
        var out: [JSON] = []
        guard count > 0 else { return out }
        for await frame in session.outbound {
            out.append(try! JSON.parse(frame))
            if out.count == count { break }
        }
        return out
    }

    func body(_ m: JSON) -> KeyMap<JSON> { m.objectValue!["d"]!.objectValue!["b"]!.objectValue! }
    func action(_ m: JSON) -> String? { m.objectValue!["d"]!.objectValue!["a"]?.stringValue }

    /// Replaces `target`'s whole state with `source`'s (the snapshot path a follower takes).
    func install(_ source: LMDBDataStore, into target: LMDBDataStore) async throws {
        var chunks: [[UInt8]] = []
        try source.storage.snapshot { chunks.append($0) }
        try await target.storage.installSnapshot(chunks: chunks)
    }

    @Test func streamsAndListensGetTheNewStateThenLaterChangesWithNoGap() async throws {
        let local = try Self.openStore("node")
        var config = NodeConfiguration()
        config.dataDirectory = TestDirectory.root
        let node = try EmberNode(config: config, ports: local.ports, logger: Logger(label: "test"))
        defer { local.close() }
        try await set(node.ports, "w", #"{"a":1,"z":26}"#)

        // An SSE stream at /w, as RestHandler.stream opens it.
        let (id, events) = try #require(node.hub.register(namespace: Self.ns, path: p("w")))
        defer { node.hub.release(id) }
        let initial = try node.ports.reader.read(namespace: Self.ns, path: p("w"))
        #expect(initial.node == n(#"{"a":1,"z":26}"#))

        // A WebSocket session: an untagged listen at /w, a tagged query (first key), a listen
        // at /y whose initial read ran before the install but completes after it, and a listen
        // at /secret the snapshot's rules no longer allow.
        let session = try #require(node.realtime.open(id: "s", namespace: Self.ns))
        let qw: JSON = .object(["i": .string(".key"), "l": .int(1), "vf": .string("l")])
        #expect(started(session.beginListen(r: 1, listen(p("w"), .default, nil, nil))))
        session.listenRead(r: 1, listen(p("w"), .default, nil, nil), indexed: true, read: initial)
        #expect(started(session.beginListen(r: 1, listen(p("w"), try QuerySpec(wire: qw), qw, 7))))
        session.listenRead(r: 2, listen(p("w"), .default, qw, 7), indexed: true, read: initial)
        #expect(started(session.beginListen(r: 1, listen(p("secret"), .default, nil, nil))))
        session.listenRead(r: 3, listen(p("secret"), .default, nil, nil), indexed: true, read: try node.ports.reader.read(namespace: Self.ns, path: p("secret")))
        #expect(started(session.beginListen(r: 1, listen(p("y"), .default, nil, nil))))
        let staleY = try node.ports.reader.read(namespace: Self.ns, path: p("y"))
        let before = await drain(session, 6)
        #expect(body(before[2])["d"] == .object(["a": .int(1)]))

        // The leader's state, further along the log: new data and rules hiding /secret.
        let leader = try Self.openStore("leader")
        defer { leader.close() }
        try await leader.ports.rules.setRules(namespace: Self.ns, text: #"{"rules": {"w": {".read": true}, "y": {".read": true}}}"#)
        try await set(leader.ports, "w", #"{"b":2,"c":3}"#)
        try await set(leader.ports, "y", "5")
        try await set(leader.ports, "secret", #""s""#)
        try await set(leader.ports, "other", "1")
        #expect(leader.appliedIndex > local.appliedIndex)
        try await install(leader, into: local)
        node.resyncListeners()
        session.listenRead(r: 4, listen(p("y"), .default, nil, nil), indexed: true, read: staleY)
        // A change applied after the install.
        try await set(node.ports, "w/a", "0")

        // SSE: a put at "/" with the whole new data, then the later change, as the stream's
        // reader filters them (after its initial read's index).
        var sse: [String] = []
        for await (index, text) in events where index > initial.appliedIndex {
            sse.append(text)
            if sse.count == 2 { break }
        }
        #expect(sse == [ChangeRouting.sseText(.put(path: .root, data: n(#"{"b":2,"c":3}"#))),
                        ChangeRouting.sseText(.put(path: p("a"), data: n("0")))])

        // WebSocket: /secret cancelled; /w full data; the query's new window; /y's initial data
        // is the new state; then the later change on both /w listens.
        let after = await drain(session, 7)
        #expect(action(after[0]) == "c")
        #expect(body(after[0])["p"] == .string("secret"))
        let pushes = Array(after[1...2])
        let untagged = try #require(pushes.first { body($0)["t"] == nil })
        #expect(action(untagged) == "d")
        #expect(body(untagged)["p"] == .string("w"))
        #expect(body(untagged)["d"] == .object(["b": .int(2), "c": .int(3)]))
        let tagged = try #require(pushes.first { body($0)["t"] == .int(7) })
        #expect(action(tagged) == "d")
        #expect(body(tagged)["d"] == .object(["b": .int(2)]))
        #expect(body(after[3])["p"] == .string("y"))
        #expect(body(after[3])["d"] == .int(5))
        #expect(after[4].objectValue?["d"]?.objectValue?["r"] == .int(4))
        let later = Array(after[5...6])
        let laterUntagged = try #require(later.first { body($0)["t"] == nil })
        #expect(body(laterUntagged)["p"] == .string("w/a"))
        #expect(body(laterUntagged)["d"] == .int(0))
        let laterTagged = try #require(later.first { body($0)["t"] == .int(7) })
        #expect(action(laterTagged) == "m")
        #expect(body(laterTagged)["d"] == .object(["a": .int(0), "b": .null]))
        #expect(session.listenCount == 3)
    }

    /// A follower's state and the leader's snapshot share one log: a location the snapshot did
    /// not change keeps its version, and its streams and listens get no repeated event.
    @Test func locationsTheSnapshotDidNotChangeGetNoRepeatedEvent() async throws {
        let leader = try Self.openStore("leader")
        defer { leader.close() }
        let local = try Self.openStore("node")
        defer { local.close() }
        try await set(leader.ports, "u", #"{"same":1}"#)
        try await set(leader.ports, "w", "1")
        try await install(leader, into: local)
        let node = try EmberNode(config: NodeConfiguration(), ports: local.ports, logger: Logger(label: "test"))

        var streams: [(id: Int, events: AsyncStream<(UInt64, String)>, initial: ReadResult)] = []
        let session = try #require(node.realtime.open(id: "s", namespace: Self.ns))
        for (r, path) in ["u", "w"].enumerated() {
            let (id, events) = try #require(node.hub.register(namespace: Self.ns, path: p(path)))
            let read = try node.ports.reader.read(namespace: Self.ns, path: p(path))
            node.hub.noteInitialRead(id: id, version: read.version)
            streams.append((id, events, read))
            #expect(started(session.beginListen(r: 1, listen(p(path), .default, nil, nil))))
            session.listenRead(r: Int64(r + 1), listen(p(path), .default, nil, nil), indexed: true, read: read)
        }
        defer { for s in streams { node.hub.release(s.id) } }
        _ = await drain(session, 4)

        // The leader goes on: /w changes, /u does not (a write beside it, one of equal value).
        try await set(leader.ports, "w", "2")
        try await set(leader.ports, "v", "9")
        try await set(leader.ports, "u/same", "1")
        try await install(leader, into: local)
        node.resyncListeners()
        try await set(node.ports, "u/later", "true")

        // /u: the next event is the later change (no repeated put of unchanged data); /w: the new value.
        var first: [String] = []
        for s in streams {
            for await (index, text) in s.events where index > s.initial.appliedIndex {
                first.append(text)
                break
            }
        }
        #expect(first == [ChangeRouting.sseText(.put(path: p("later"), data: n("true"))),
                          ChangeRouting.sseText(.put(path: .root, data: n("2")))])
        let pushes = await drain(session, 2)
        #expect(pushes.map { body($0)["p"] } == [.string("w"), .string("u/later")])
        #expect(body(pushes[0])["d"] == .int(2))
    }

    @Test func aStreamWhoseInitialReadSawTheNewStateSkipsTheResyncPut() async throws {
        let local = try Self.openStore("node")
        let node = try EmberNode(config: NodeConfiguration(), ports: local.ports, logger: Logger(label: "test"))
        defer { local.close() }
        let leader = try Self.openStore("leader")
        defer { leader.close() }
        try await set(leader.ports, "w", "1")
        try await set(leader.ports, "w", "2")
        // Registered before the install, initial read after it (the read and the resync put
        // carry the same index).
        let (id, events) = try #require(node.hub.register(namespace: Self.ns, path: p("w")))
        defer { node.hub.release(id) }
        try await install(leader, into: local)
        let initial = try node.ports.reader.read(namespace: Self.ns, path: p("w"))
        #expect(initial.node == n("2"))
        node.resyncListeners()
        try await set(node.ports, "w", "3")
        var sse: [String] = []
        for await (index, text) in events where index > initial.appliedIndex {
            sse.append(text)
            break
        }
        #expect(sse == [ChangeRouting.sseText(.put(path: .root, data: n("3")))])
    }
}
