import EmberCore
import Foundation
import Synchronization
import Testing
@testable import EmberStorage

/// Results released before their transaction commits (`applyCommittedReleasing`,
/// `appendAndApplyReleasing`): the caller has them while the writer commits, and every read that
/// starts after the release waits for that commit (`Visibility`).
@Suite struct ReleasedApplyTests {
    /// Holds the writer just before a released transaction commits, until `open()`.
    final class CommitGate: Sendable {
        let reached = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        let held = Atomic<Int>(0)

        func install(on s: EmberStore) {
            s.core.beforeReleasedCommit.withLock { $0 = { [self] in held.add(1, ordering: .relaxed); reached.signal(); go.wait() } }
        }
        func open() { go.signal() }
    }

    /// Events in the order the writer thread saw them.
    final class Order: Sendable {
        private let events = Mutex<[String]>([])
        func add(_ e: String) { events.withLock { $0.append(e) } }
        var all: [String] { events.withLock { $0 } }
    }

    /// Waits (10 s at most) until `done` holds: the event a check that something has not
    /// happened waits for, instead of a sleep that passes on a slow machine.
    static func waitUntil(_ done: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !done() && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
    }

    static func entry(_ i: UInt64, _ path: String, _ json: String) -> LogEntry {
        LogEntry(index: i, term: 1, namespace: "t", operation: .set(path: p(path), value: j(json), condition: nil), timestamp: 0)
    }

    /// A blocking read on a thread of its own, reporting when it returned and what it saw.
    final class Reader: Sendable {
        let returned = Atomic<Bool>(false)
        let seen = Mutex<Node?>(nil)
        let done = DispatchSemaphore(value: 0)

        init(_ s: EmberStore, _ path: String, waiting: Bool = true) {
            Thread { [self] in
                if !waiting { EmberStore.readWithoutWaitingOnThisThread() }
                let node = try? s.get(path)
                seen.withLock { $0 = node }
                returned.store(true, ordering: .releasing)
                done.signal()
            }.start()
        }
    }

    @Test func resultsComeBackBeforeTheCommitAndReadsWaitForIt() async throws {
        let s = try openStore()
        try await s.append(entries: [Self.entry(1, "/a", "1"), Self.entry(2, "/b", "2")])
        let gate = CommitGate()
        gate.install(on: s)
        // The call returns while the writer is held before the commit.
        let (results, release) = try await s.applyCommittedReleasing(through: 2)
        #expect(results.map(\.index) == [1, 2])
        #expect(gate.reached.wait(timeout: .now() + 10) == .success)
        let heldOnce = gate.held.load(ordering: .relaxed)
        #expect(heldOnce == 1)
        #expect(s.appliedIndex == 2)
        // A read that starts now waits for the commit, then sees the released writes.
        let reader = Reader(s, "/a")
        // One that must not wait (the listeners' feed) sees the state before them.
        let unwaiting = Reader(s, "/a", waiting: false)
        #expect(unwaiting.done.wait(timeout: .now() + 10) == .success)
        #expect(unwaiting.seen.withLock { $0 } == .empty)
        let committed = Atomic<Bool>(false)
        let waiter = Task { await s.committed(release); committed.store(true, ordering: .releasing) }
        let asyncReader = Task { await s.released(); return try s.get("/b") }
        // The reader's thread and both tasks wait for the commit (had they not, they return).
        try await Self.waitUntil {
            s.core.visibility.waiters.threads == 1 && s.core.visibility.waiters.tasks == 2 || reader.returned.load(ordering: .acquiring)
                || committed.load(ordering: .acquiring)
        }
        #expect(s.core.visibility.waiters.threads == 1 && s.core.visibility.waiters.tasks == 2)
        let readReturned = reader.returned.load(ordering: .acquiring)
        #expect(!readReturned, "a read after the release returned before its commit")
        let committedEarly = committed.load(ordering: .acquiring)
        #expect(!committedEarly)
        gate.open()
        #expect(reader.done.wait(timeout: .now() + 10) == .success)
        #expect(reader.seen.withLock { $0 } == n("1"))
        await waiter.value
        let committedAfter = committed.load(ordering: .acquiring)
        #expect(committedAfter)
        #expect(try await asyncReader.value == n("2"))
        // Nothing pending: reads do not wait.
        #expect(try s.get("/b") == n("2"))
    }

    @Test func appendedEntriesAreDurableOnlyOnceCommitted() async throws {
        let dir = tempDir()
        do {
            let s = try openStore(dir)
            try await s.append(entries: [Self.entry(1, "/a", "1")])
            let gate = CommitGate()
            gate.install(on: s)
            let (results, release) = try await s.appendAndApplyReleasing(entries: [Self.entry(2, "/b", "2")], through: 1)
            #expect(results.map(\.index) == [1])
            #expect(gate.reached.wait(timeout: .now() + 10) == .success)
            let committed = Atomic<Bool>(false)
            let waiter = Task { await s.committed(release); committed.store(true, ordering: .releasing) }
            try await Self.waitUntil { s.core.visibility.waiters.tasks == 1 || committed.load(ordering: .acquiring) }
            #expect(s.core.visibility.waiters.tasks == 1, "the waiter waits for the commit")
            let durableEarly = committed.load(ordering: .acquiring)
        #expect(!durableEarly, "the append was reported durable before its commit")
            gate.open()
            await waiter.value
            #expect(s.lastLogIndex == 2)
            s.core.beforeReleasedCommit.withLock { $0 = nil }
        }
        let s = try openStore(dir)
        #expect(s.appliedIndex == 1 && s.lastLogIndex == 2)
        #expect(try s.get("/a") == n("1") && s.get("/b") == .empty)
    }

    @Test func aRulesChangeIsVisibleBeforeItsResultsComeBack() async throws {
        let s = try openStore()
        let rules = LogEntry(index: 1, term: 1, namespace: "t", operation: .setRules(text: #"{"rules": {".read": true, ".write": false}}"#),
                             timestamp: 0)
        try await s.append(entries: [rules, Self.entry(2, "/a", "1")])
        let gate = CommitGate()
        gate.install(on: s)
        // The writer's own order of the commit and the hand-out (no task scheduling in it).
        let order = Order()
        s.core.beforeReleasedCommit.withLock { hold in
            let held = hold
            hold = { order.add("commit"); held?() }
        }
        s.core.afterReleasedHandOut.withLock { $0 = { order.add("handed out") } }
        let returned = Atomic<Bool>(false)
        let call = Task {
            let r = try await s.applyCommittedReleasing(through: 2)
            returned.store(true, ordering: .releasing)
            return r.results
        }
        #expect(gate.reached.wait(timeout: .now() + 10) == .success)
        // The batch changed rules: its commit comes first (readers on the feed never wait).
        #expect(order.all == ["commit"], "a rules change was handed out before it was visible")
        let handedOut = returned.load(ordering: .acquiring)
        #expect(!handedOut, "a rules change was handed out before it was visible")
        gate.open()
        let results = try await call.value
        // The writer records the hand-out just after resuming the caller: wait for it.
        try await Self.waitUntil { order.all.count == 2 }
        #expect(order.all == ["commit", "handed out"])
        #expect(results.map(\.index) == [1, 2] && results[0].rulesChanged)
        #expect(s.storedRules(namespace: "t") != nil)
    }
}
