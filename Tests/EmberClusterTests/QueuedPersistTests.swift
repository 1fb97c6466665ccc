import EmberRaft
import EmberRaftHost
import Testing

@testable import EmberCluster

/// What a Raft host holds behind a persist queued off its loop is performed, once the persist is
/// durable, with the held persists written as one (`RaftHost.coalesced`): Raft's buffering
/// rules (a later write replaces entries from its first index on, the last term and vote win),
/// the writes' applies in that write (in its transaction: no apply left to sync alone), and
/// every other effect in its order after it.
@Suite struct QueuedPersistTests {
    static func entries(_ range: ClosedRange<UInt64>, term: UInt64) -> [LogEntry] {
        range.map { LogEntry(index: $0, term: term, kind: .normal, data: Array("i\($0)t\(term)".utf8)) }
    }

    static func send(_ n: UInt64) -> HostEffect {
        .send(Message(from: "n1", to: "n2", term: 1, payload: .heartbeatResponse(readContext: n)))
    }

    @Test func heldPersistsAreWrittenAsOneAndEveryOtherEffectKeepsItsOrderAfterIt() {
        let a = HostPersist(entries: Self.entries(5...7, term: 1), apply: Self.entries(4...4, term: 1))
        let b = HostPersist(hardState: HardState(term: 2, votedFor: "n3", commit: 5), entries: Self.entries(6...8, term: 2),
                            apply: Self.entries(5...5, term: 1))
        let held: [HostEffect] = [Self.send(1), .readReady(id: 9, index: 3), .persist(a), Self.send(2),
                                  .apply(Self.entries(4...4, term: 1), metaSync: false), .persist(b), .readReady(id: 10, index: 5)]
        let merged = HostPersist(hardState: HardState(term: 2, votedFor: "n3", commit: 5),
                                 entries: Self.entries(5...5, term: 1) + Self.entries(6...8, term: 2),
                                 apply: Self.entries(4...5, term: 1))
        #expect(RaftHost.coalesced(held) == [
            Self.send(1), .readReady(id: 9, index: 3), .persist(merged),
            Self.send(2), .apply(Self.entries(4...4, term: 1), metaSync: false), .readReady(id: 10, index: 5),
        ])
        #expect(RaftHost.coalesced(held).filter { if case .persist = $0 { true } else { false } }.count == 1)
    }

    @Test func withoutAPersistNothingMoves() {
        let held: [HostEffect] = [Self.send(1), .apply(Self.entries(4...5, term: 1), metaSync: true), .readFailed(id: 3)]
        #expect(RaftHost.coalesced(held) == held)
    }
}
