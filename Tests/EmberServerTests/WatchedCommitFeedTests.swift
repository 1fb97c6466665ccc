import EmberTestSupport
import EmberCore
import Foundation
import Synchronization
import Testing

@testable import EmberNodeStore
@testable import EmberServer
@testable import EmberStorage

/// The node's commit feed builds changes only for namespaces some listener is on
/// (`CommitFeedPort.onCommit(watched:_:)`, issue 38): a commit nobody listens to costs no change
/// and no feed wake-up, and a listener that registers after such a commit still gets it, from
/// its initial read.
@Suite struct WatchedCommitFeedTests {
    func p(_ s: String) -> Path { try! Path(s) }
    func n(_ s: String) -> Node { try! Node(json: JSON.parse(s)) }

    static func openStore() throws -> EmberStore {
        let dir = TestDirectory.root + "ember-watched-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var options = StoreOptions()
        options.mapSize = 1 << 30
        return try EmberStore(directory: dir, options: options)
    }

    func entry(_ i: UInt64, _ ns: String, _ path: String, _ json: String) -> EmberStorage.LogEntry {
        EmberStorage.LogEntry(index: i, term: 1, namespace: ns, operation: .set(path: p(path), value: try! JSON.parse(json), condition: nil),
                              timestamp: 0)
    }

    /// Holds the writer just before a released transaction commits (`beforeReleasedCommit`).
    final class CommitGate: Sendable {
        let reached = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        func install(on s: EmberStore) { s.core.beforeReleasedCommit.withLock { $0 = { [self] in reached.signal(); go.wait() } } }
        func open() { go.signal() }
    }

    /// A blocking read through the node's read port on a thread of its own.
    final class Reader: Sendable {
        let returned = Atomic<Bool>(false)
        let seen = Mutex<ReadResult?>(nil)
        let done = DispatchSemaphore(value: 0)

        init(_ reads: LMDBReads, _ ns: String, _ path: Path) {
            Thread { [self] in
                let r = try? reads.read(namespace: ns, path: path)
                seen.withLock { $0 = r }
                returned.store(true, ordering: .releasing)
                done.signal()
            }.start()
        }
    }

    /// Without a listener the handler is never called (nor a change built); a stream registered
    /// while that apply's commit is held reads the applied state once it commits, then gets the
    /// next change through the feed.
    @Test func aCommitNobodyWatchesIsSkippedAndALaterListenerReadsIt() async throws {
        let s = try Self.openStore()
        defer { s.close() }
        let hub = StreamHub(), realtime = RealtimeHub()
        let asked = Atomic<Int>(0)
        let handed = Mutex<[CommittedChange]>([])
        LMDBCommitFeed(store: s).onCommit(watched: {
            asked.add(1, ordering: .relaxed)
            return EmberNode.watchedNamespaces(hub, realtime)
        }) { changes in
            handed.withLock { $0 += changes }
            for c in changes { hub.publish(c) }
        }
        try await s.append(entries: [entry(1, "t", "/a", "1")])
        let gate = CommitGate()
        gate.install(on: s)
        // The results are handed out (and were offered to the feed) while the commit is held.
        let (results, _) = try await s.applyCommittedReleasing(through: 1)
        #expect(results.map(\.index) == [1])
        #expect(gate.reached.wait(timeout: .now() + 10) == .success)
        #expect(asked.load(ordering: .relaxed) == 1)
        #expect(handed.withLock { $0 }.isEmpty, "a change was built for a namespace nobody listens to")
        // A stream registers now, then reads (as `RestHandler.stream` does): the read waits for
        // the held commit and holds the change the feed skipped.
        guard let (id, events) = hub.register(namespace: "t", path: p("a")) else {
            Issue.record("the stream was not registered"); return
        }
        let reader = Reader(LMDBReads(store: s), "t", p("a"))
        let deadline = ContinuousClock.now + .seconds(10)
        while s.core.visibility.waiters.threads < 1 && !reader.returned.load(ordering: .acquiring) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(1))
        }
        let early = reader.returned.load(ordering: .acquiring)
        #expect(!early, "the new listener's read did not wait for the commit it must hold")
        gate.open()
        #expect(reader.done.wait(timeout: .now() + 10) == .success)
        let first = reader.seen.withLock { $0 }
        #expect(first?.node == n("1") && first?.appliedIndex == 1)
        s.core.beforeReleasedCommit.withLock { $0 = nil }
        // Watched now: the next commit's change is built and reaches the stream.
        try await s.append(entries: [entry(2, "t", "/a", "2"), entry(3, "other", "/b", "3")])
        _ = try await s.applyCommitted(through: 3)
        #expect(asked.load(ordering: .relaxed) == 2)
        #expect(handed.withLock { $0 }.map(\.index) == [2], "only the watched namespace's change is built")
        var it = events.makeAsyncIterator()
        let event = await it.next()
        #expect(event?.0 == 2 && event?.1.contains("\"data\":2") == true)
        hub.release(id)
        // Nobody listens again: nothing more is built.
        try await s.append(entries: [entry(4, "t", "/a", "4")])
        _ = try await s.applyCommitted(through: 4)
        #expect(handed.withLock { $0 }.map(\.index) == [2])
    }

    /// A WebSocket listen names its namespace from the moment it begins (before its read) to
    /// its end; an SSE stream from its registration to its release.
    @Test func theWatchedNamespacesFollowListensAndStreams() throws {
        let hub = StreamHub(), realtime = RealtimeHub()
        #expect(EmberNode.watchedNamespaces(hub, realtime).isEmpty)
        guard let session = realtime.open(id: "s", namespace: "ws") else { Issue.record("no session"); return }
        #expect(EmberNode.watchedNamespaces(hub, realtime).isEmpty, "a connection without a listen watches nothing")
        #expect(started(session.beginListen(r: 1, listen(p("x"), .default, nil, nil))))
        #expect(EmberNode.watchedNamespaces(hub, realtime) == ["ws"])
        let stream = hub.register(namespace: "sse", path: p("y"))
        #expect(EmberNode.watchedNamespaces(hub, realtime) == ["ws", "sse"])
        session.endListen(listen(p("x"), .default, nil, nil))
        #expect(EmberNode.watchedNamespaces(hub, realtime) == ["sse"])
        hub.release(stream!.id)
        #expect(EmberNode.watchedNamespaces(hub, realtime).isEmpty)
        realtime.close(session)
    }
}
