import EmberCore
import EmberTestSupport
import Foundation
import Synchronization
import Testing
@testable import EmberStorage

/// A delivery lane's reads (`triggerDeliveryRead`, `triggerDeliveryState`) while an apply's
/// results are out and its commit is not done (`TriggerReleases`): they answer without waiting
/// for that commit, with exactly the rows the waiting read returns once it is done, unless the
/// pending apply changed more than its namespace's records and cursors — then they wait.
@Suite(.printsSeedOnFailure) struct TriggerDeliveryReadTests {
    typealias Gate = ReleasedApplyTests.CommitGate

    static let defs = #"""
    {"msgs": {"path": "/messages/{id}", "on": ["created", "updated"], "url": "http://127.0.0.1:9/h", "secret": "0123456789abcdef"},
     "msgs2": {"path": "/messages/{id}", "on": ["created", "updated"], "url": "http://127.0.0.1:9/h2", "secret": "0123456789abcdef"},
     "likes": {"path": "/rooms/{room}/likes/{uid}", "on": ["written"], "url": "http://127.0.0.1:9/l", "secret": "0123456789abcdef"}}
    """#

    static func entry(_ i: UInt64, _ op: WriteOperation) -> LogEntry {
        LogEntry(index: i, term: 1, namespace: "t", operation: op, timestamp: 1_000 + Int64(i))
    }

    /// A call on a thread of its own: whether it returned, and what.
    final class Call<T: Sendable>: Sendable {
        let value = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        let returned = Atomic<Bool>(false)

        init(_ body: @escaping @Sendable () throws -> T) {
            Thread { [self] in
                let v = try? body()
                value.withLock { $0 = v }
                returned.store(true, ordering: .releasing)
                done.signal()
            }.start()
        }
    }

    /// Whether `call` waits for the held commit: it returned, or it is the one thread waiting.
    static func waits<T: Sendable>(_ s: EmberStore, _ call: Call<T>) async throws -> Bool {
        try await ReleasedApplyTests.waitUntil { call.returned.load(ordering: .acquiring) || s.core.visibility.waiters.threads == 1 }
        return !call.returned.load(ordering: .acquiring)
    }

    struct Row: Equatable {
        let index: UInt64
        let own: Bool
        let events: [TriggerEvent]
    }

    static func rows(_ r: TriggerOutboxRead?) -> [Row] {
        (r?.rows ?? []).map { Row(index: $0.index, own: $0.own, events: $0.events) }
    }

    /// One store with the triggers defined (applied and committed) and the lanes' early reads
    /// in use; the next free log index.
    static func store() async throws -> (EmberStore, UInt64) {
        let s = try openStore()
        try await s.append(entries: [entry(1, .triggers(.define(text: defs)))])
        _ = try await s.applyCommitted(through: 1)
        // The writer collects released records once a lane read early (`TriggerReleases.active`).
        _ = try s.triggerDeliveryRead(namespace: "t", trigger: "msgs", after: nil, limit: 1, floor: 0)
        #expect(s.core.triggerReleases.active)
        return (s, 2)
    }

    @Test func theRecordsOfAnApplyNotCommittedYetAreReadWithoutWaiting() async throws {
        let (s, first) = try await Self.store()
        defer { s.close() }
        let writes: [WriteOperation] = [
            .set(path: p("/messages/m1"), value: j(#"{"n":1}"#)),
            .set(path: p("/elsewhere"), value: j("1")),
            .set(path: p("/messages/m2"), value: j(#"{"n":2}"#)),
        ]
        try await s.append(entries: writes.enumerated().map { Self.entry(first + UInt64($0), $1) })
        let gate = Gate()
        gate.install(on: s)
        let (results, release) = try await s.applyCommittedReleasing(through: first + 2)
        let msgs = try TriggerTailsTests.group(Self.defs, "msgs")
        #expect(results.map(\.triggerReach) == [.group(msgs), .none, .group(msgs)])
        #expect(gate.reached.wait(timeout: .now() + 10) == .success)
        let early = Call { try s.triggerDeliveryRead(namespace: "t", trigger: "msgs", after: nil, limit: 100, floor: 0) }
        let state = Call { try s.triggerDeliveryState(namespace: "t", name: "msgs") }
        #expect(early.done.wait(timeout: .now() + 10) == .success, "the lane's read waited for the commit")
        #expect(state.done.wait(timeout: .now() + 10) == .success, "the lane's state waited for the commit")
        #expect(Self.rows(early.value.withLock { $0 }).count == 2)
        // What the fronts read still waits for it.
        let visible = Call { try s.triggerOutboxRead(namespace: "t", trigger: "msgs", after: nil, limit: 100) }
        #expect(try await Self.waits(s, visible))
        gate.open()
        await s.committed(release)
        #expect(visible.done.wait(timeout: .now() + 10) == .success)
        let after = try s.triggerOutboxRead(namespace: "t", trigger: "msgs", after: nil, limit: 100)
        #expect(Self.rows(early.value.withLock { $0 }) == Self.rows(after))
        #expect(after.rows.map(\.index) == [first, first + 2])
        s.core.beforeReleasedCommit.withLock { $0 = nil }
    }

    /// The events a crowded group's lanes read (released before the commit, then from the
    /// released records kept after it) carry their members serialized once by the apply,
    /// exactly `writeSharedMembers`' bytes; a group read by one trigger gets none (its lane
    /// writes its bodies straight).
    @Test func aCrowdedGroupsEventsCarryTheirMembersSerializedOnce() async throws {
        let (s, first) = try await Self.store()
        defer { s.close() }
        let msgs = try TriggerTailsTests.group(Self.defs, "msgs"), likes = try TriggerTailsTests.group(Self.defs, "likes")
        #expect(try TriggerSet(text: Self.defs).crowdedGroups == [msgs])
        _ = try s.triggerDeliveryRead(namespace: "t", trigger: "likes", after: nil, limit: 1, floor: 0)
        try await s.append(entries: [Self.entry(first, .set(path: p("/messages/m1"), value: j(#"{"n":1,"s":"é\"x"}"#))),
                                     Self.entry(first + 1, .set(path: p("/rooms/r1/likes/u1"), value: j("true"))),
                                     Self.entry(first + 2, .update(path: p("/messages"), values: [(p("m1/n"), j("2")), (p("m2"), j("3"))]))])
        let gate = Gate()
        gate.install(on: s)
        let (_, release) = try await s.applyCommittedReleasing(through: first + 2)
        #expect(gate.reached.wait(timeout: .now() + 10) == .success)
        func check(_ read: TriggerOutboxRead?, crowded: Bool) -> Int {
            var n = 0
            for r in read?.rows ?? [] {
                for e in r.events {
                    var want: [UInt8] = []
                    e.writeSharedMembers(namespace: "t", into: &want)
                    #expect(e.sharedMembers == (crowded ? want : nil), "entry \(r.index) seq \(e.seq)")
                    n += 1
                }
            }
            return n
        }
        let early = Call { try s.triggerDeliveryRead(namespace: "t", trigger: "msgs2", after: nil, limit: 100, floor: 0) }
        let alone = Call { try s.triggerDeliveryRead(namespace: "t", trigger: "likes", after: nil, limit: 100, floor: 0) }
        #expect(early.done.wait(timeout: .now() + 10) == .success && alone.done.wait(timeout: .now() + 10) == .success)
        #expect(check(early.value.withLock { $0 }, crowded: true) == 3)
        #expect(check(alone.value.withLock { $0 }, crowded: false) == 1)
        gate.open()
        await s.committed(release)
        // After the commit the lanes read the released records kept for them: the same events.
        #expect(check(try s.triggerDeliveryRead(namespace: "t", trigger: "msgs", after: nil, limit: 100, floor: 0), crowded: true) == 3)
        #expect(s.core.triggerRecords.cached("t", msgs, first)?.first?.sharedMembers != nil)
        #expect(s.core.triggerRecords.cached("t", likes, first + 1)?.first?.sharedMembers == nil)
        s.core.beforeReleasedCommit.withLock { $0 = nil }
    }

    /// A pending pause (any entry that may change more than records and cursors) makes the
    /// lane wait: it sees the trigger paused, not the state before.
    @Test func aPendingPauseMakesTheLaneWait() async throws {
        let (s, first) = try await Self.store()
        defer { s.close() }
        try await s.append(entries: [Self.entry(first, .triggers(.pause(name: "msgs"))),
                                     Self.entry(first + 1, .set(path: p("/messages/m1"), value: j("1")))])
        let gate = Gate()
        gate.install(on: s)
        let (results, release) = try await s.applyCommittedReleasing(through: first + 1)
        #expect(results.first?.triggerReach == .namespace)
        #expect(gate.reached.wait(timeout: .now() + 10) == .success)
        let state = Call { try s.triggerDeliveryState(namespace: "t", name: "msgs") }
        #expect(try await Self.waits(s, state))
        gate.open()
        await s.committed(release)
        #expect(state.done.wait(timeout: .now() + 10) == .success)
        #expect(state.value.withLock { $0 }??.paused == true)
        s.core.beforeReleasedCommit.withLock { $0 = nil }
    }

    /// Seeded batches of writes over two groups, elsewhere, updates reaching both, and cursor
    /// entries, each applied with its commit held: every trigger's early read (with the cursor
    /// its lane logged as `floor`) returns what the waiting read returns after the commit, and
    /// waits exactly when the batch holds an entry that reaches the namespace whole.
    @Test func earlyReadsReturnWhatTheCommitShows() async throws {
        var g = TestSeed.generator(0xea51_1e55)
        let (s, start) = try await Self.store()
        defer { s.close() }
        let msgs = try TriggerTailsTests.group(Self.defs, "msgs"), likes = try TriggerTailsTests.group(Self.defs, "likes")
        var next = start
        var floors: [String: UInt64] = [:]
        let gate = Gate()
        gate.install(on: s)
        var waited = 0, early = 0
        for round in 0..<30 {
            var batch: [LogEntry] = []
            for _ in 0..<Int.random(in: 1...6, using: &g) {
                let k = Int(next)
                let op: WriteOperation
                switch Int.random(in: 0..<10, using: &g) {
                case 0...3: op = .set(path: p("/messages/m\(Int.random(in: 0..<12, using: &g))"), value: j(#"{"n":\#(k)}"#))
                case 4, 5: op = .set(path: p("/rooms/r\(k % 3)/likes/u\(Int.random(in: 0..<4, using: &g))"), value: j("\(k)"))
                case 6: op = .set(path: p("/elsewhere/x\(k % 4)"), value: j("\(k)"))
                case 7 where round % 3 == 0:
                    // Both groups in one write: the namespace's lanes wait for it.
                    op = .update(path: p("/"), values: [(p("messages/m\(k % 12)/n"), j("\(k)")), (p("rooms/r\(k % 3)/likes/v\(k)"), j("true"))])
                default:
                    // The lanes' cursors: through what they delivered (the floor each lane keeps).
                    let through = UInt64(Int.random(in: 1...(k - 1), using: &g))
                    op = .triggers(.advance([TriggerCursor(name: "msgs", group: msgs, through: through, rows: []),
                                             TriggerCursor(name: "likes", group: likes, through: through, rows: [])]))
                    floors["msgs"] = max(floors["msgs"] ?? 0, through)
                    floors["likes"] = max(floors["likes"] ?? 0, through)
                }
                batch.append(Self.entry(next, op))
                next += 1
            }
            try await s.append(entries: batch)
            let (results, release) = try await s.applyCommittedReleasing(through: next - 1)
            #expect(gate.reached.wait(timeout: .now() + 10) == .success)
            let whole = results.contains { $0.triggerReach == .namespace }
            var reads: [(name: String, after: UInt64?, floor: UInt64, call: Call<TriggerOutboxRead>)] = []
            for name in ["msgs", "msgs2", "likes"] {
                let floor = floors[name] ?? 0
                let after = Bool.random(using: &g) ? nil : floors[name]
                reads.append((name, after, floor, Call { try s.triggerDeliveryRead(namespace: "t", trigger: name, after: after, limit: 256, floor: floor) }))
            }
            // All three answer at once, or (the namespace reached whole) all three wait.
            try await ReleasedApplyTests.waitUntil {
                reads.allSatisfy { $0.call.returned.load(ordering: .acquiring) } || s.core.visibility.waiters.threads == reads.count
            }
            let answered = reads.filter { $0.call.returned.load(ordering: .acquiring) }.count
            #expect(answered == (whole ? 0 : reads.count), "round \(round): \(answered) early reads answered; the batch reaches the namespace whole: \(whole)")
            if whole { waited += 1 } else { early += 1 }
            gate.open()
            await s.committed(release)
            for r in reads {
                #expect(r.call.done.wait(timeout: .now() + 10) == .success)
                let committed = try s.triggerOutboxRead(namespace: "t", trigger: r.name, after: r.after, limit: 256, floor: r.floor)
                #expect(Self.rows(r.call.value.withLock { $0 }) == Self.rows(committed), "round \(round) \(r.name)")
            }
        }
        #expect(waited > 0 && early > 0, "the history waited \(waited) times and read early \(early) times")
        s.core.beforeReleasedCommit.withLock { $0 = nil }
    }
}
