@testable import EmberClient
import Foundation
import Synchronization
import Testing

/// Collects strings from callbacks (any thread) and waits for conditions with a deadline.
final class Recorder: Sendable {
    private let items = Mutex<[String]>([])

    func add(_ s: String) { items.withLock { $0.append(s) } }
    var all: [String] { items.withLock { $0 } }
    func clear() { items.withLock { $0.removeAll() } }

    /// Waits until `condition` holds on the recorded items; fails the test on timeout. The
    /// deadline only bounds a failure: parallel tests can hold the cooperative threads for
    /// seconds, so it is long.
    @discardableResult
    func wait(timeout: Duration = patience, sourceLocation: SourceLocation = #_sourceLocation,
              _ condition: ([String]) -> Bool) async -> [String] {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let snapshot = all
            if condition(snapshot) { return snapshot }
            try? await Task.sleep(for: .milliseconds(10))
        }
        let snapshot = all
        Issue.record("timed out; recorded: \(snapshot)", sourceLocation: sourceLocation)
        return snapshot
    }

    func wait(count: Int, timeout: Duration = patience, sourceLocation: SourceLocation = #_sourceLocation) async -> [String] {
        await wait(timeout: timeout, sourceLocation: sourceLocation) { $0.count >= count }
    }
}

/// How long a test waits for something that should happen before it fails: a bound on a
/// failure, never what a pass waits for (parallel tests under load held the cooperative threads
/// past 5 and 6 s deadlines; the checks return as soon as their condition holds).
let patience: Duration = .seconds(60)

/// Polls `condition` until it holds or the deadline passes.
func eventually(timeout: Duration = patience, _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: .milliseconds(20))
    }
    return false
}

/// Calls the fire-and-forget (non-async) SDK methods from async code: inside an async function
/// Swift picks the `async throws` overloads, as with the iOS SDK.
func withoutWaiting(_ body: () -> Void) { body() }

/// Runs `body` with a time limit.
func withTimeout<T: Sendable>(_ limit: Duration = .seconds(20), _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            throw TestFailure("timed out after \(limit)")
        }
        let result = try await group.next()!
        group.cancelAll()
        return result
    }
}

extension DataSnapshot {
    /// Compact JSON of the value (export format), for assertions.
    var json: String { jsonString }
}

extension Database {
    /// Returns once the repo handled everything queued on it before this call and the callbacks
    /// that work raised have run (both queues are serial): after it, an event that has not
    /// arrived was not raised by anything done before. The barrier for checks that something
    /// did not happen, instead of a sleep that passes on a slow machine.
    func eventsDelivered() async {
        let repo = self.repo
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            repo.queue.async { repo.callbackQueue.async { c.resume() } }
        }
    }
}
