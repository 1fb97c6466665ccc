import EmberTestSupport
import EmberCore
import EmberNodeStore
import EmberStorage
import Foundation
import Logging
import Synchronization
import Testing
@testable import EmberServer

/// A busy trigger's replicated cursor keeps up with its deliveries (issue 36, the growing lag
/// of `ember-bench triggers` run (b)): while one `advance` entry is in flight the lane goes on
/// delivering, and the next entry carries everything delivered meanwhile, not one POST's worth
/// (`TriggerDelivery.maxSettle` entries) per entry.
@Suite struct TriggerCursorCatchUpTests {
    /// The store's triggers port; the first `advance` entry is held until `release`, every
    /// entry logged is recorded.
    final class HeldAdvance: TriggersPort, Sendable {
        let inner: LMDBTriggers
        let logged = Mutex<[TriggerOperation]>([])
        let gate = AsyncStream<Void>.makeStream()
        let holding = Atomic<Int>(0)  // 0 not yet, 1 held, 2 released

        init(_ store: EmberStore) { inner = LMDBTriggers(store: store) }

        func release() { gate.continuation.yield() }

        func log(namespace: String, _ operation: TriggerOperation) async throws {
            if case .advance = operation, holding.compareExchange(expected: 0, desired: 1, ordering: .acquiringAndReleasing).exchanged {
                var it = gate.stream.makeAsyncIterator()
                _ = await it.next()
                holding.store(2, ordering: .releasing)
            }
            try await inner.log(namespace: namespace, operation)
            logged.withLock { $0.append(operation) }
        }
        func definitions(namespace: String) throws -> TriggerSet { try inner.definitions(namespace: namespace) }
        func triggers(namespace: String) throws -> [TriggerInfo] { try inner.triggers(namespace: namespace) }
        func state(namespace: String, trigger: String) throws -> TriggerState? { try inner.state(namespace: namespace, trigger: trigger) }
        func namespaces() throws -> [String] { try inner.namespaces() }
        func outbox(namespace: String, trigger: String, after: UInt64?, limit: Int) throws -> [(index: UInt64, events: [TriggerEvent])] {
            try inner.outbox(namespace: namespace, trigger: trigger, after: after, limit: limit)
        }
        func read(namespace: String, trigger: String, after: UInt64?, limit: Int) throws -> TriggerOutboxRead {
            try inner.read(namespace: namespace, trigger: trigger, after: after, limit: limit)
        }
        func deadLetters(namespace: String, trigger: String, limit: Int) throws -> [(index: UInt64, reason: String, events: [TriggerEvent])] {
            try inner.deadLetters(namespace: namespace, trigger: trigger, limit: limit)
        }
        var delivers: Bool { true }
        var logsAdvance: Bool { true }
        func onCommit(_ handler: @escaping @Sendable () -> Void) { inner.onCommit(handler) }
    }

    /// POSTs the receiver (an in-process node: each POST a pushed child) holds.
    static func posts(_ port: Int) async throws -> Int {
        let got = try await rawHTTP(port: port, "GET", "/hook.json?ns=r&shallow=true")
        guard got.status == 200, let o = try JSONSerialization.jsonObject(with: Data(got.body.utf8), options: .fragmentsAllowed) as? [String: Any] else { return 0 }
        return o.count
    }

    @Test func deliveriesMadeWhileACursorIsLoggedGoInTheNextEntryWhole() async throws {
        try await InProcessNode.with { receiver in
            var o = StoreOptions()
            o.mapSize = 1 << 28
            let dir = TestDirectory.root + "ember-cursor-catchup-\(UUID().uuidString)"
            let store = try EmberStore(directory: dir, options: o)
            defer { store.close(); try? FileManager.default.removeItem(atPath: dir) }
            let port = HeldAdvance(store)
            let url = "http://127.0.0.1:\(receiver.port)/hook.json?ns=r"
            // 10 events per POST: the 2,400 entries after the first POST are 240 settles of 10.
            let batch = 10, writes = 2 * TriggerDelivery.maxSettle + 410
            try await port.log(namespace: "t", .define(text: #"{"a": {"path": "/m/{id}", "on": ["created"], "url": "\#(url)", "secret": "0123456789abcdef", "batchSize": \#(batch), "inFlight": 4}}"#))
            var ix: [UInt64] = []
            try await withThrowingTaskGroup(of: UInt64.self) { g in
                for i in 0..<writes {
                    g.addTask { try await store.submit(namespace: "t", .set(path: try Path("/m/k\(i)"), value: .int(Int64(i)))).index }
                }
                for try await i in g { ix.append(i) }
            }
            ix.sort()
            let worker = TriggerWorker(port: port, runtime: TriggerRuntime(), logger: Logger(label: "test"))
            worker.start()
            // Every event reaches the receiver while the first cursor entry is still held.
            let deadline = ContinuousClock.now + .seconds(120)
            while try await Self.posts(receiver.port) < writes / batch, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(try await Self.posts(receiver.port) == writes / batch)
            #expect(port.holding.load(ordering: .acquiring) == 1, "the first advance is held")
            #expect(try store.triggerState(namespace: "t", name: "a")?.cursor ?? 0 < ix[0], "nothing logged yet")
            port.release()
            while try store.triggerState(namespace: "t", name: "a")?.cursor ?? 0 < ix.last!, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            await worker.stop()
            let advances = port.logged.withLock { $0.filter { if case .advance = $0 { return true } else { return false } } }
            // The held entry (the first POST's cursor), then one for the other 2,400 entries;
            // capped at maxSettle entries each there were four.
            #expect(advances.count == 2, "advance entries: \(advances.count)")
            if advances.count == 2, case .advance(let last) = advances[1] {
                #expect(last.map(\.through) == [ix.last!])
            }
            let st = try #require(try store.triggers(namespace: "t").first?.state)
            #expect(st.cursor == ix.last! && st.pending == 0)
        }
    }

    /// The queue of a lane's cursors as the worker takes it: `advance` takes every delivered
    /// cursor queued (up to `maxSettle` own rows), `settle` at most `maxSettle` entries, and
    /// neither crosses from delivered to dead.
    @Test func coalescingTakesEveryDeliveredCursorIntoOneAdvance() {
        typealias Item = TriggerLane.Settling.Item
        func item(_ from: UInt64, _ n: Int, reason: String? = nil, own: Int = 0) -> Item {
            let ix = (0..<UInt64(n)).map { from + $0 }
            return (ix, reason, reason == nil ? 0 : n, Array(ix.prefix(own)))
        }
        var q: [Item] = (0..<5).map { item(1 + UInt64($0) * 1_000, 1_000) } + [item(5_001, 3, reason: "HTTP 500"), item(5_004, 2)]
        let a = TriggerLane.coalesce(&q, advance: true)
        #expect(a.indexes.count == 5_000 && a.indexes.max() == 5_000 && a.reason == nil)
        #expect(q.count == 2)
        let dead = TriggerLane.coalesce(&q, advance: true)
        #expect(dead.reason == "HTTP 500" && dead.dead == 3 && q.count == 1)

        var s: [Item] = (0..<5).map { item(1 + UInt64($0) * 1_000, 1_000) }
        let first = TriggerLane.coalesce(&s, advance: false)
        #expect(first.indexes.count == TriggerDelivery.maxSettle && s.count == 4)

        // Own rows (named one by one in the entry) stay within maxSettle.
        var own: [Item] = [item(1, 1_000, own: 600), item(1_001, 1_000, own: 600), item(2_001, 1_000)]
        let o1 = TriggerLane.coalesce(&own, advance: true)
        #expect(o1.own.count == 600 && own.count == 2)
        let o2 = TriggerLane.coalesce(&own, advance: true)
        #expect(o2.own.count == 600 && o2.indexes.max() == 3_000 && own.isEmpty)
    }
}
