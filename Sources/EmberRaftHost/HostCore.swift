// EmberRaftHost: the decisions of a Raft host, without I/O (sans-IO). `HostCore` wraps a
// `RaftNode`, collects a turn's actions and plans them as ordered effects: persist before send
// (with the leader's replication sends ahead of its own write, thesis 10.2.1), one write per
// turn with the committed entries applied in it, a follower's apply deferred into the next
// turn's write, snapshots staged and installed in order, compaction held while an apply waits
// or an image is being prepared. EmberCluster's RaftHost performs the effects on LMDB and the
// peer transport; EmberRaftSim performs them on its simulated disk and network.
// Must not: do I/O, read clocks or draw randomness (time and randomness are inputs).

import EmberRaft

/// The core of a Raft host: feed it inputs (`handle`), perform the effects it returns, in order.
///
/// A turn: any number of `.event`s (each stepped at once; proposal outcomes come back
/// immediately), then `.endTurn`, which returns the turn's plan. After performing it, a runtime
/// steps `.event(.persisted(through:term:))` for the last `HostPersist.report` made durable and
/// ends another turn.
public struct HostCore: Sendable {
    public private(set) var node: RaftNode
    /// The turn's actions so far, in the order Raft produced them.
    var turn: [Action] = []
    /// Term and vote as last handed to a `.persist` (a runtime makes each durable or stops).
    public internal(set) var durableHard: HardState
    /// Persists buffered until the plan's next write (`flush`).
    var pendingHard: HardState?
    var pendingEntries: [LogEntry] = []
    /// A follower's committed entries whose apply waits for the next turn's write (`plan`).
    public internal(set) var deferredApply: [LogEntry] = []
    /// A `.prepareSnapshot` is out and not answered yet.
    public internal(set) var preparingSnapshot = false

    public init(node: RaftNode, durableHard: HardState? = nil) {
        self.node = node
        self.durableHard = durableHard ?? node.hardState
    }

    /// Whether a turn has actions not yet planned.
    public var turnPending: Bool { !turn.isEmpty }

    public mutating func handle(_ input: HostInput) -> [HostEffect] {
        switch input {
        case .event(let event):
            return step(event)
        case .endTurn(let inputWaiting):
            let actions = turn
            turn = []
            return plan(actions, inputWaiting: inputWaiting)
        case .compact(let index):
            // Raft counts a deferred apply as applied already: a snapshot must not claim more
            // than the state machine holds. An image being written needs the entries after it.
            guard deferredApply.isEmpty, !preparingSnapshot, index > node.log.snapshotIndex else { return [] }
            precondition(index <= node.appliedIndex, "compaction beyond the applied index")
            var effects: [HostEffect] = []
            for case .persistSnapshot(let meta, false) in node.step(.compact(index: index)) {
                effects.append(.compacted(meta))
            }
            return effects
        case .snapshotPrepared(let index, let size):
            preparingSnapshot = false
            return step(.snapshotReady(index: index, size: size))
        case .snapshotPrepareFailed:
            preparingSnapshot = false  // Raft asks again on the next heartbeat round
            return []
        case .snapshotUnavailable:
            return prepare()
        }
    }

    private mutating func step(_ event: Event) -> [HostEffect] {
        let actions = node.step(event)
        var outcomes: [HostEffect] = []
        for action in actions {
            switch action {
            case .proposalAccepted(let index, let term): outcomes.append(.proposalAccepted(index: index, term: term))
            case .proposalRejected(let why): outcomes.append(.proposalRejected(why))
            default: turn.append(action)
            }
        }
        return outcomes
    }

    mutating func prepare() -> [HostEffect] {
        guard !preparingSnapshot else { return [] }
        preparingSnapshot = true
        return [.prepareSnapshot]
    }
}
