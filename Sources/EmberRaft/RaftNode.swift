// EmberRaft — the Raft state machine: a deterministic, sans-IO value type.
// Must not: import anything, do I/O, or read clocks or system randomness (EmberCluster's
// RaftHost hosts it; EmberRaftSim simulates it).
//
// Usage: `var actions = node.step(event)`; perform the actions following the contract in
// Action.swift (persist before send/apply). No clocks, threads or I/O happen in here; time is
// `Event.tick`, randomness comes from a PRNG seeded through `RaftConfig.randomSeed`.
//
// The implementation is split by concern: RaftNode+Election, +Replication, +Snapshot,
// +ReadIndex, +Membership.

public struct RaftNode: Sendable {
    public let id: NodeID
    public let config: RaftConfig
    var rng: SplitMix64

    // Persistent state (mirrored to the host via .persistHardState / .persistEntries).
    public internal(set) var term: UInt64
    public internal(set) var votedFor: NodeID?
    public internal(set) var log: RaftLog

    // Volatile state.
    public internal(set) var role: RaftRole = .follower
    public internal(set) var leaderID: NodeID?
    public internal(set) var commitIndex: UInt64
    /// Highest index handed to the host (via `.apply` or `.restoreSnapshot`).
    public internal(set) var appliedIndex: UInt64
    /// Highest log index the host reported durable (`Event.persisted`); a leader's own vote in
    /// the commit quorum counts only up to here, so it may send entries before writing them.
    public internal(set) var durableIndex: UInt64
    /// Membership in effect: from the latest config entry in the log (effective once appended).
    public internal(set) var membership: Membership
    /// Index of the entry (or snapshot) that defined `membership`.
    public internal(set) var configIndex: UInt64
    /// A newer committed configuration without us that we heard of but do not hold
    /// (`Event.removedFromCluster`); 0 when none. Volatile: a restart learns it again.
    var removedAtConfigIndex: UInt64 = 0

    var electionElapsed = 0
    var heartbeatElapsed = 0
    var randomizedElectionTimeout = 0
    /// Votes (or pre-votes) received in the current campaign.
    var votes: [NodeID: Bool] = [:]

    // Leader state.
    var progress: [NodeID: PeerProgress] = [:]
    var leadTransferee: NodeID?
    /// Index of the latest config-change entry the leader appended (only one may be uncommitted).
    var pendingConfigIndex: UInt64 = 0

    // ReadIndex state (see RaftNode+ReadIndex).
    var readRound: UInt64 = 0
    var pendingReads: [PendingRead] = []
    var readsAwaitingLeaderCommit: [ReadOrigin] = []
    var readsAwaitingApply: [(id: UInt64, index: UInt64)] = []
    /// Follower: how far the leader of `term` said its log is durable (`.leaderDurable`).
    var leaderDurable: (term: UInt64, index: UInt64) = (0, 0)
    /// Leader: the durable index last announced with `.leaderDurable`.
    var announcedDurable: UInt64 = 0
    /// Learner: a successful answer held back to go with a later one (RaftNode+LearnerAck).
    var deferredAck: DeferredAck?
    /// Leader: learners whose committed entries are held for a bigger batch, and whether they
    /// are being sent regardless (RaftNode+LearnerBatch).
    var learnersHeld: Set<NodeID> = []
    var flushingLearners = false
    /// Follower: commit index advances made by `inferCommit` (status only; not persisted).
    public internal(set) var inferredCommits: UInt64 = 0

    // Follower: snapshot being received in chunks (the bytes go to the host's staging area).
    var incomingSnapshot: IncomingSnapshot?
    /// Leader: the image of the state machine the host prepared last (`Event.snapshotReady`).
    public internal(set) var snapshotSource: SnapshotSource?

    // Output accumulated during one `step`.
    var out = Outbox()
    var lastEmittedHardState: HardState

    struct Outbox: Sendable {
        var persists: [Action] = []
        var restore: SnapshotMetadata?
        var messages: [Message] = []
        var other: [Action] = []
    }

    /// Creates a node from durable state.
    /// - Parameter appliedIndex: how far the host's state machine already is; defaults to the
    ///   snapshot index (the host restored its state machine from `state.snapshot`).
    public init(id: NodeID, config: RaftConfig, state: PersistentState, appliedIndex: UInt64? = nil) {
        let log = RaftLog(snapshot: state.snapshot, entries: state.entries)
        let commit = max(state.hardState.commit, log.snapshotIndex)
        precondition(commit <= log.lastIndex, "persisted commit index beyond the persisted log")
        let applied = appliedIndex ?? log.snapshotIndex
        precondition(applied >= log.snapshotIndex && applied <= commit, "appliedIndex out of range")
        self.id = id
        self.config = config
        self.rng = SplitMix64(seed: config.randomSeed ^ UInt64(truncatingIfNeeded: id.hashValueStable))
        self.term = state.hardState.term
        self.votedFor = state.hardState.votedFor
        self.log = log
        self.commitIndex = commit
        self.appliedIndex = applied
        self.durableIndex = log.lastIndex  // loaded from disk
        self.configIndex = log.lastConfigIndex(atOrBefore: log.lastIndex)
        self.membership = log.membership(at: log.lastIndex)
        self.lastEmittedHardState = state.hardState
        resetElectionTimer()
    }

    /// Feeds one event and returns the resulting actions (see Action.swift for the contract).
    public mutating func step(_ event: Event) -> [Action] {
        switch event {
        case .tick: tick()
        case .receive(let m):
            precondition(m.to == id, "message delivered to the wrong node")
            receive(m)
        case .propose(let data): propose(batch: [data])
        case .proposeBatch(let batch): propose(batch: batch)
        case .proposeConfigChange(let change, let context): proposeConfigChange(change, context: context)
        case .readIndex(let id): requestRead(id: id)
        case .transferLeadership(let target): transferLeadership(to: target)
        case .compact(let index): compact(index: index)
        case .snapshotReady(let index, let size): snapshotReady(index: index, size: size)
        case .flushLearners: flushHeldLearners()
        case .campaign:
            if role != .leader && isPromotable { campaign(transfer: false) }
        case .removedFromCluster(let index): learnRemoval(configIndex: index)
        case .persisted(let index, let term): persisted(through: index, term: term)
        }
        return drainOutbox()
    }

    public var hardState: HardState { HardState(term: term, votedFor: votedFor, commit: commitIndex) }

    /// The host context of the config entry that defined `membership`, or nil when the
    /// membership comes from the snapshot (the host keeps its own copy of that one).
    public var membershipContext: [UInt8]? {
        guard configIndex > log.snapshotIndex, let e = log.entry(at: configIndex), e.kind == .configChange,
              let decoded = ConfigEntry(decoding: e.data) else { return nil }
        return decoded.context
    }

    /// Only voters may campaign (a learner, or a removed or not-yet-added node, just follows).
    var isPromotable: Bool { membership.contains(id) && removedAtConfigIndex <= configIndex }

    /// A non-voting member in the configuration in effect.
    public var isLearner: Bool { membership.isLearner(id) }

    /// Removed from the cluster: by a configuration in our log, or one we were told of
    /// (`Event.removedFromCluster`). A node still joining (no voters yet) is not removed.
    public var isRemoved: Bool {
        (!membership.voters.isEmpty && !membership.isMember(id)) || removedAtConfigIndex > configIndex
    }

    public var status: RaftStatus {
        RaftStatus(
            id: id, role: role, term: term, votedFor: votedFor, leaderID: leaderID,
            commitIndex: commitIndex, appliedIndex: appliedIndex, lastIndex: log.lastIndex,
            snapshotIndex: log.snapshotIndex, membership: membership,
            progress: role == .leader ? progress : [:], leadTransferee: leadTransferee,
            configIndex: configIndex, removed: isRemoved, inferredCommits: inferredCommits, learner: isLearner)
    }

    // MARK: - Output

    mutating func send(_ to: NodeID, _ payload: Message.Payload, term: UInt64? = nil) {
        out.messages.append(Message(from: id, to: to, term: term ?? self.term, payload: payload))
    }

    /// Orders the step's output: persistence first, then state-machine effects, then sends.
    mutating func drainOutbox() -> [Action] {
        assert(commitIndex <= log.lastIndex, "commit beyond log")
        assert(appliedIndex <= commitIndex, "applied beyond commit")
        var actions = out.persists
        let hs = hardState
        if hs != lastEmittedHardState {
            actions.append(.persistHardState(hs))
            lastEmittedHardState = hs
        }
        if let snap = out.restore { actions.append(.restoreSnapshot(snap)) }
        if commitIndex > appliedIndex {
            actions.append(.apply(Array(log.entries(from: appliedIndex + 1, through: commitIndex))))
            appliedIndex = commitIndex
        }
        if !readsAwaitingApply.isEmpty {
            let ready = readsAwaitingApply.filter { $0.index <= appliedIndex }
            readsAwaitingApply.removeAll { $0.index <= appliedIndex }
            actions += ready.map { .readReady(id: $0.id, index: $0.index) }
        }
        actions += out.messages.map { .send($0) }
        actions += out.other
        out = Outbox()
        return actions
    }

    // MARK: - Role transitions

    mutating func resetElectionTimer() {
        electionElapsed = 0
        heartbeatElapsed = 0
        // Randomized in [electionTick, 2*electionTick) so split votes resolve (paper 5.2).
        randomizedElectionTimeout = config.electionTick + rng.below(config.electionTick)
    }

    mutating func becomeFollower(term newTerm: UInt64, leader: NodeID?) {
        assert(newTerm >= term, "terms never go backwards")
        if role == .leader { abandonLeaderReads() }
        if newTerm != term {
            term = newTerm
            votedFor = nil
        }
        role = .follower
        leaderID = leader
        votes = [:]
        progress = [:]
        learnersHeld = []
        leadTransferee = nil
        resetElectionTimer()
    }

    mutating func becomeLeader() {
        assert(role == .candidate, "only candidates win elections")
        role = .leader
        leaderID = id
        votes = [:]
        leadTransferee = nil
        resetElectionTimer()
        progress = [:]
        learnersHeld = []
        announcedDurable = 0
        for peer in membership.members where peer != id {
            progress[peer] = PeerProgress(nextIndex: log.lastIndex + 1)
        }
        // Any config entry already in our log may be uncommitted: block new changes until the
        // no-op below commits (Ongaro's fix for single-server changes across leader changes).
        pendingConfigIndex = log.lastIndex
        appendAsLeader(kind: .noop, data: [])
        broadcastAppend()
    }
}

extension String {
    /// FNV-1a; `hashValue` is randomized per process and would break seeded determinism.
    var hashValueStable: UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        return h
    }
}
