import EmberCore
import Foundation
import Synchronization
import Testing
@testable import EmberStorage

/// `EmberStore.enqueue`: bursts of writes queued without awaiting each one; results reach the
/// sink per commit, in queue order, only once the commit is durable.
@Suite struct PipelinedEnqueueTests {
    /// Records every call; `wait` returns once `count` results arrived.
    final class RecordingSink: CommitSink, @unchecked Sendable {
        struct Call {
            var tags: [UInt64]
            var results: [Result<WriteResult, any Error>]
            /// The store's applied index when the call came (the commit is published first).
            var appliedAtCall: UInt64
        }
        let store: Mutex<EmberStore?> = Mutex(nil)
        let calls = Mutex<[Call]>([])

        func committed(_ results: [(tag: UInt64, result: Result<WriteResult, any Error>)]) {
            let applied = store.withLock { $0?.appliedIndex ?? 0 }
            calls.withLock { $0.append(Call(tags: results.map(\.tag), results: results.map(\.result), appliedAtCall: applied)) }
        }

        func wait(for count: Int) async throws {
            let deadline = ContinuousClock.now + .seconds(20)
            while calls.withLock({ $0.reduce(0) { $0 + $1.tags.count } }) < count {
                guard ContinuousClock.now < deadline else { throw TestTimeout() }
                try await Task.sleep(for: .milliseconds(5))
            }
        }
    }
    struct TestTimeout: Error {}

    func write(_ path: String, _ value: String, tag: UInt64, ns: String = "t") -> PipelinedWrite {
        PipelinedWrite(namespace: ns, operation: .set(path: p(path), value: j(value)), tag: tag)
    }

    @Test func aBurstIsCommittedTogetherAndAnsweredInOrder() async throws {
        let s = try openStore()
        let sink = RecordingSink()
        sink.store.withLock { $0 = s }
        let burst = (0..<500).map { write("/w/k\($0 % 37)", "\($0)", tag: UInt64(1000 + $0)) }
        #expect(s.enqueue(burst, sink: sink).isEmpty)
        try await sink.wait(for: 500)
        let calls = sink.calls.withLock { $0 }
        // Queued under one lock, so the writer took them as one batch: one commit, one call.
        #expect(calls.count == 1)
        #expect(calls.flatMap(\.tags) == (0..<500).map { UInt64(1000 + $0) })
        let results = try calls.flatMap(\.results).map { try $0.get() }
        #expect(results.map(\.index) == Array(1...500))
        #expect(results.allSatisfy { $0.isApplied })
        // Answered only after the commit: the whole batch was applied when the sink ran.
        #expect(calls[0].appliedAtCall == 500)
        #expect(s.metrics.batches == 1)
        for k in 0..<37 {
            let last = (0..<500).last { $0 % 37 == k }!
            #expect(try s.get("/w/k\(k)") == n("\(last)"))
        }
    }

    @Test func refusedWritesComeBackAtOnceAndWriteNothing() async throws {
        let s = try openStore()
        let sink = RecordingSink()
        let burst = [write("/a", "1", tag: 1), write("/b", #"{"bad.key": 1}"#, tag: 2), write("/c", "3", tag: 3)]
        let refused = s.enqueue(burst, sink: sink)
        #expect(refused.map(\.tag) == [2])
        if case .invalid? = refused.first?.error as? StorageError {} else { Issue.record("expected .invalid, got \(refused)") }
        try await sink.wait(for: 2)
        #expect(sink.calls.withLock { $0.flatMap(\.tags) } == [1, 3])
        #expect(s.appliedIndex == 2)
        #expect(try s.get("/b").isEmpty)
        #expect(try s.get("/c") == n("3"))
    }

    @Test func aFullQueueRefusesTheRestOfTheBurst() async throws {
        var o = smallOptions()
        o.maxPendingWrites = 10
        let s = try openStore(tempDir(), o)
        // Hold the writer so the queue cannot drain while the burst is queued.
        let release = DispatchSemaphore(value: 0), holding = DispatchSemaphore(value: 0)
        let held = Task { try await s.perform { _ in holding.signal(); release.wait() } }
        #expect(holding.wait(timeout: .now() + 10) == .success, "the writer is held")
        let sink = RecordingSink()
        let refused = s.enqueue((0..<25).map { write("/q/k\($0)", "\($0)", tag: UInt64($0)) }, sink: sink)
        release.signal()
        try await held.value
        #expect(refused.map(\.tag) == (10..<25).map { UInt64($0) })
        #expect(refused.allSatisfy { if case .queueFull? = $0.error as? StorageError { true } else { false } })
        try await sink.wait(for: 10)
        #expect(s.metrics.queueRejections == 15)
        #expect(try s.shallowKeys(namespace: "t", path: p("/q")).count == 10)
    }

    @Test func aClosedStoreRefusesEverything() throws {
        let s = try openStore()
        s.close()
        let refused = s.enqueue([write("/a", "1", tag: 7)], sink: RecordingSink())
        #expect(refused.map(\.tag) == [7])
        if case .closed? = refused.first?.error as? StorageError {} else { Issue.record("expected .closed") }
    }

    @Test func pipelinedAndAwaitedWritesShareTheLogOrder() async throws {
        let s = try openStore()
        let sink = RecordingSink()
        #expect(s.enqueue([write("/x", "1", tag: 1)], sink: sink).isEmpty)
        let awaited = try await s.set("/x", "2")
        #expect(s.enqueue([write("/x", "3", tag: 2)], sink: sink).isEmpty)
        try await sink.wait(for: 2)
        let results = try sink.calls.withLock { $0 }.flatMap(\.results).map { try $0.get() }
        #expect(results.map(\.index) == [1, 3])
        #expect(awaited.index == 2)
        #expect(try s.get("/x") == n("3"))
    }
}
