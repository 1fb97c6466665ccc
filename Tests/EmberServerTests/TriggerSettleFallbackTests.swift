import EmberTestSupport
import EmberCore
import EmberNodeStore
import EmberStorage
import Foundation
import Logging
import Synchronization
import Testing
@testable import EmberServer

/// While a cluster has a member of 0.6.0 (peer level 3, `TriggersPort.logsAdvance` false), the
/// delivery worker logs each trigger's delivered cursors as 0.6.0's `settle` entries, naming
/// every delivered entry (a 0.6.0 member drops its outbox rows by them); once every member
/// reads `advance`, the lanes' cursors go together in `advance` entries. A real worker delivers
/// over HTTP to a real receiver (an in-process node: each POST becomes a pushed child).
@Suite struct TriggerSettleFallbackTests {
    /// The store's triggers port with the level gate in the test's hands and every entry recorded.
    final class Gated: TriggersPort, Sendable {
        let inner: LMDBTriggers
        let logged = Mutex<[TriggerOperation]>([])
        let advance = Atomic<Bool>(false)

        init(_ store: EmberStore) { inner = LMDBTriggers(store: store) }

        func log(namespace: String, _ operation: TriggerOperation) async throws {
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
        var logsAdvance: Bool { advance.load(ordering: .relaxed) }
        func onCommit(_ handler: @escaping @Sendable () -> Void) { inner.onCommit(handler) }
    }

    /// Until both triggers' cursors reached `index` (60 s at most).
    static func waitDelivered(_ store: EmberStore, through index: UInt64) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let states = try store.triggers(namespace: "t")
            if states.count == 2, states.allSatisfy({ $0.state.cursor >= index }) { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("not delivered through \(index): \(try store.triggers(namespace: "t").map(\.state.cursor))")
    }

    /// Until the entries the port recorded satisfy `done` (60 s at most).
    static func waitLogged(_ port: Gated, _ done: ([TriggerOperation]) -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if port.logged.withLock({ done($0) }) { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("the entries logged never got there: \(port.logged.withLock { $0 })")
    }

    @Test func deliveredCursorsGoAsSettleEntriesUntilEveryMemberReadsAdvance() async throws {
        try await InProcessNode.with { receiver in
            var o = StoreOptions()
            o.mapSize = 1 << 28
            let dir = TestDirectory.root + "ember-settle-fallback-\(UUID().uuidString)"
            let store = try EmberStore(directory: dir, options: o)
            defer { store.close(); try? FileManager.default.removeItem(atPath: dir) }
            let port = Gated(store)
            let url = "http://127.0.0.1:\(receiver.port)/hook.json?ns=r"
            let doc = "{" + ["a", "b"].map {
                #""\#($0)": {"path": "/m/{id}", "on": ["created"], "url": "\#(url)", "secret": "0123456789abcdef", "batchSize": 2, "inFlight": 2}"#
            }.joined(separator: ",") + "}"
            try await port.log(namespace: "t", .define(text: doc))
            var ix: [UInt64] = []
            for i in 0..<7 {
                ix.append(try await store.submit(namespace: "t", .set(path: try Path("/m/k\(i)"), value: .int(Int64(i)))).index)
            }
            let worker = TriggerWorker(port: port, runtime: TriggerRuntime(), logger: Logger(label: "test"))
            worker.start()
            try await Self.waitDelivered(store, through: ix.last!)
            // The port records an entry once its `log` returned, which may come after the store
            // applied it (what `waitDelivered` sees): until both triggers' last settle is recorded.
            try await Self.waitLogged(port) { ops in
                ["a", "b"].allSatisfy { n in ops.contains { if case .settle(n, let i, nil) = $0 { i.contains(ix.last!) } else { false } } }
            }

            // Gate closed: settle entries, one trigger each, naming every delivered entry.
            let closed = port.logged.withLock { Array($0.dropFirst()) }
            var settled: [String: [UInt64]] = [:]
            for op in closed {
                guard case .settle(let name, let indexes, let reason) = op, reason == nil else {
                    Issue.record("not a delivered settle entry: \(op)")
                    continue
                }
                settled[name, default: []] += indexes
            }
            #expect(settled["a"]?.sorted() == ix && settled["b"]?.sorted() == ix)

            // Every member reads advance: the next cursors go in advance entries.
            port.advance.store(true, ordering: .relaxed)
            let count = port.logged.withLock { $0.count }
            var more: [UInt64] = []
            for i in 7..<10 {
                more.append(try await store.submit(namespace: "t", .set(path: try Path("/m/k\(i)"), value: .int(Int64(i)))).index)
            }
            try await Self.waitDelivered(store, through: more.last!)
            try await Self.waitLogged(port) { ops in
                ["a", "b"].allSatisfy { n in
                    ops.dropFirst(count).contains { if case .advance(let c) = $0 { c.contains { $0.name == n && $0.through >= more.last! } } else { false } }
                }
            }
            let opened = port.logged.withLock { Array($0.dropFirst(count)) }
            #expect(!opened.isEmpty)
            for op in opened {
                guard case .advance(let cursors) = op else {
                    Issue.record("not an advance entry: \(op)")
                    continue
                }
                #expect(cursors.allSatisfy { Set(["a", "b"]).contains($0.name) && $0.through > ix.last! })
            }
            await worker.stop()

            // The receiver got each trigger's events, in its own POSTs.
            let got = try await rawHTTP(port: receiver.port, "GET", "/hook.json?ns=r")
            #expect(got.status == 200)
            let posts = try #require(try JSONSerialization.jsonObject(with: Data(got.body.utf8)) as? [String: Any])
            var sequences: [String: [UInt64]] = [:]
            for (_, post) in posts {
                let events = (post as? [Any]) ?? ((post as? [String: Any]).map { $0.sorted { Int($0.key)! < Int($1.key)! }.map(\.value) } ?? [])
                for case let e as [String: Any] in events {
                    sequences[e["trigger"] as? String ?? "?", default: []].append(UInt64(e["sequence"] as? String ?? "") ?? 0)
                }
            }
            #expect(sequences["a"]?.sorted() == ix + more && sequences["b"]?.sorted() == ix + more)
        }
    }
}
