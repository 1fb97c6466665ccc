import EmberTestSupport
import EmberCore
import EmberNodeStore
import EmberStorage
import Foundation
import Synchronization
import Testing
@testable import EmberServer

/// The delivery worker's cursor log (issue 36) over a real store: cursors the lanes hand in while
/// one entry is being logged go together in the next one, and each lane hears when its cursor
/// committed.
@Suite struct TriggerCursorLogTests {
    /// The store's triggers port, with every entry it logs recorded and the first one held
    /// until `release` (what a commit round trip in flight looks like to the worker).
    final class Recording: TriggersPort, Sendable {
        let inner: LMDBTriggers
        let logged = Mutex<[TriggerOperation]>([])
        let gate = AsyncStream<Void>.makeStream()
        let first = Mutex(true)

        init(_ store: EmberStore) { inner = LMDBTriggers(store: store) }

        func release() { gate.continuation.yield() }

        func log(namespace: String, _ operation: TriggerOperation) async throws {
            if first.withLock({ f in defer { f = false }; return f }) {
                var it = gate.stream.makeAsyncIterator()
                _ = await it.next()
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

    @Test func cursorsHandedInMeanwhileGoInOneEntry() async throws {
        var o = StoreOptions()
        o.mapSize = 1 << 28
        let store = try EmberStore(directory: TestDirectory.root + "ember-cursorlog-\(UUID().uuidString)", options: o)
        defer { store.close() }
        let names = ["a", "b", "c", "d"]
        let doc = "{" + names.map { #""\#($0)": {"path": "/m/{id}", "on": ["written"], "url": "http://127.0.0.1:9/h", "secret": "0123456789abcdef"}"# }
            .joined(separator: ",") + "}"
        let port = Recording(store)
        try await LMDBTriggers(store: store).log(namespace: "t", .define(text: doc))
        var ix: [UInt64] = []
        for i in 0..<3 {
            ix.append(try await store.submit(namespace: "t", .set(path: try Path("/m/k\(i)"), value: .int(Int64(i)))).index)
        }
        let group = try #require(store.triggerSet(namespace: "t").definitions.first?.group)
        let log = TriggerCursorLog(port: port)
        let (done, doneIn) = AsyncStream<String>.makeStream()
        func submit(_ name: String, through: UInt64) {
            log.submit(namespace: "t", TriggerCursor(name: name, group: group, through: through, rows: [])) { error in
                doneIn.yield("\(name):\(error ?? "ok")")
            }
        }
        // The first entry is held in flight; three lanes hand in theirs meanwhile.
        submit("a", through: ix[0])
        while port.first.withLock({ $0 }) { await Task.yield() }
        submit("b", through: ix[1])
        submit("c", through: ix[2])
        submit("d", through: ix[2])
        port.release()
        var heard: Set<String> = []
        for await d in done {
            heard.insert(d)
            if heard.count == 4 { break }
        }
        #expect(heard == ["a:ok", "b:ok", "c:ok", "d:ok"])
        let entries = port.logged.withLock { $0 }
        #expect(entries.count == 2, "one entry in flight, then one for everything handed in meanwhile")
        if entries.count == 2, case .advance(let second) = entries[1] {
            #expect(second.map(\.name) == ["b", "c", "d"])
        } else {
            Issue.record("entries: \(entries)")
        }
        let states = try store.triggers(namespace: "t")
        #expect(states.map(\.state.cursor) == [ix[0], ix[1], ix[2], ix[2]])
        #expect(states.map(\.state.pending) == [2, 1, 0, 0])
    }
}
