import EmberTestSupport
import EmberCore
import EmberNodeStore
import EmberStorage
import Foundation
import Logging
import Testing
@testable import EmberServer

/// A lane tops up from its outbox until its machine wants no more (issue 36 (c)): a batching
/// trigger's POST carries up to its `batchSize` events, not one read's `maxRowsPerRead` rows.
@Suite struct TriggerTopUpTests {
    /// Each POST the receiver (an in-process node) got, oldest first: its events.
    static func posts(_ port: Int) async throws -> [Int] {
        let got = try await rawHTTP(port: port, "GET", "/hook.json?ns=r")
        guard got.status == 200,
              let o = try JSONSerialization.jsonObject(with: Data(got.body.utf8), options: .fragmentsAllowed) as? [String: Any] else { return [] }
        // Push ids sort in the order the POSTs were written.
        return o.keys.sorted().map { ($0, o[$0]) }.map { _, v in (v as? [Any])?.count ?? (v as? [String: Any])?.count ?? 1 }
    }

    @Test func aBacklogGoesOutInBatchesOfTheTriggersSizeNotOfOneRead() async throws {
        try await InProcessNode.with { receiver in
            var o = StoreOptions()
            o.mapSize = 1 << 28
            let dir = TestDirectory.root + "ember-trigger-topup-\(UUID().uuidString)"
            let store = try EmberStore(directory: dir, options: o)
            defer { store.close(); try? FileManager.default.removeItem(atPath: dir) }
            let port = LMDBTriggers(store: store)
            let url = "http://127.0.0.1:\(receiver.port)/hook.json?ns=r"
            // More than two reads' rows before the lane starts, fewer than a batch: one POST.
            let writes = 2 * TriggerWorker.maxRowsPerRead + 150
            try await port.log(namespace: "t", .define(text: #"{"a": {"path": "/m/{id}", "on": ["created"], "url": "\#(url)", "secret": "0123456789abcdef", "batchSize": 1000, "inFlight": 1}}"#))
            try await withThrowingTaskGroup(of: Void.self) { g in
                for i in 0..<writes {
                    g.addTask { _ = try await store.submit(namespace: "t", .set(path: try Path("/m/k\(i)"), value: .int(Int64(i)))) }
                }
                try await g.waitForAll()
            }
            let worker = TriggerWorker(port: port, runtime: TriggerRuntime(), logger: Logger(label: "test"))
            worker.start()
            let deadline = ContinuousClock.now + .seconds(120)
            while try await Self.posts(receiver.port).reduce(0, +) < writes, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            await worker.stop()
            #expect(try await Self.posts(receiver.port) == [writes], "one POST of every event")
        }
    }
}
