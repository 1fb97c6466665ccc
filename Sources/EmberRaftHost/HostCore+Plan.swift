import EmberRaft

/// Turning a turn's Raft actions into ordered effects.
extension HostCore {
    /// A turn without snapshot work is planned in two phases: every persist of the turn in one
    /// write, with every committed entry applied in it, then every other send and the reads made
    /// ready. A leader's AppendEntries and heartbeats go out before that write (Action.swift
    /// contract 2's exception): followers write the entries while we do, and Raft counts our
    /// copy only once `.persisted`; so do a follower's heartbeat answers (they claim nothing
    /// written: `mayPrecedeDurability`). With nothing to make durable, messages go first and the
    /// apply after. That is the contract's order with persists moved earlier, which is always
    /// allowed (durable sooner never breaks persist-before-send); performing actions strictly in
    /// order instead cost one fsync per proposal in a turn: no group commit.
    ///
    /// Messages to learners go after the voters' (issue 38): a learner counts toward no quorum,
    /// so nothing the turn commits or answers waits for it. A big batch (more than
    /// `learnerSendBeforeWriteMaxEntries` entries to encode) goes last, after the write, the
    /// apply and the reads: ahead of them its encoding held them up. Small ones (a lightly loaded
    /// leader's commits, heartbeats) go just before the turn's write: committed entries may
    /// precede it (durable on a majority already), and after it a learner's copy, and its
    /// listeners' events, waited for the leader's sync of the next writes. Each learner's
    /// messages keep their order (all of them go early or all late).
    mutating func plan(_ actions: [Action], inputWaiting: Bool) -> [HostEffect] {
        if actions.contains(where: \.touchesSnapshot) { return planInOrder(actions) }
        let effects = planTwoPhase(actions, inputWaiting: inputWaiting)
        guard !node.membership.learners.isEmpty else { return effects }
        var others: [HostEffect] = [], learnerSends: [Message] = []
        var late = Set<NodeID>()
        others.reserveCapacity(effects.count)
        for effect in effects {
            if case .send(let message) = effect, node.membership.isLearner(message.to) {
                learnerSends.append(message)
                if !Self.sendsBeforeWrite(message) { late.insert(message.to) }
            } else {
                others.append(effect)
            }
        }
        guard !learnerSends.isEmpty else { return effects }
        let early = learnerSends.filter { !late.contains($0.to) }.map { HostEffect.send($0) }
        let rest = learnerSends.filter { late.contains($0.to) }.map { HostEffect.send($0) }
        guard !early.isEmpty, let write = others.firstIndex(where: { if case .persist = $0 { true } else { false } }) else {
            return others + early + rest
        }
        others.insert(contentsOf: early, at: write)
        return others + rest
    }

    /// Most entries a learner's message may carry to go out ahead of the turn's write (`plan`):
    /// encoding 64 small entries takes microseconds; a saturated leader's batches of hundreds go
    /// last.
    public static let learnerSendBeforeWriteMaxEntries = 64

    /// Whether a message to a learner may go just before the turn's write (`plan`).
    static func sendsBeforeWrite(_ m: Message) -> Bool {
        switch m.payload {
        case .appendEntries(let a): return a.entries.count <= learnerSendBeforeWriteMaxEntries
        case .heartbeat: return true
        default: return false
        }
    }

    /// The two-phase plan (`plan`), messages in Raft's order.
    private mutating func planTwoPhase(_ actions: [Action], inputWaiting: Bool) -> [HostEffect] {
        // An apply the last turn left to this one (at most one turn: `carried` applies now).
        var apply = deferredApply
        let carried = !deferredApply.isEmpty
        deferredApply = []
        for action in actions {
            switch action {
            case .persistHardState(let hs): pendingHard = hs
            case .persistEntries(let entries): buffer(entries)
            case .apply(let entries): apply += entries
            default: break
            }
        }
        var effects: [HostEffect] = []
        if mustPersist {
            var afterWrite: [HostEffect] = []
            for case .send(let message) in actions {
                if message.payload.mayPrecedeDurability {
                    effects.append(.send(message))
                } else {
                    afterWrite.append(.send(message))  // votes and acks speak for what we wrote
                }
            }
            // The other sends wait for the write anyway: applying in its transaction delays them
            // only by the apply's CPU time and saves a whole sync per turn.
            effects += flush(applying: apply)
            effects += afterWrite
        } else {
            _ = flush(applying: [])  // a commit-only hard state: nothing to write
            // The new commit index goes out before the apply's sync, so followers apply (and
            // answer) in parallel with us.
            for case .send(let message) in actions { effects.append(.send(message)) }
            if !apply.isEmpty {
                let readsReady = actions.contains { if case .readReady = $0 { true } else { false } }
                if inputWaiting && !carried && !readsReady && node.role == .follower {
                    // A follower that learned of a commit while more input waits (usually the
                    // next entries to append) applies in that turn's write: an apply-only commit
                    // now would hold that append (and its ack) up by one sync, and a follower
                    // answering two syncs late costs the leader its lease (check quorum). Not
                    // with reads made ready: they must see the apply first.
                    deferredApply = apply
                } else {
                    // Idle (nothing waits): the apply's commit may skip the meta page's sync.
                    effects.append(.apply(apply, metaSync: inputWaiting))
                }
            }
        }
        for action in actions {
            switch action {
            case .sendSnapshotChunk(let request): effects.append(.sendSnapshotChunk(request))
            case .prepareSnapshot: effects += prepare()
            case .readReady(let id, let index): effects.append(.readReady(id: id, index: index))
            case .readFailed(let id): effects.append(.readFailed(id: id))
            default: break
            }
        }
        return effects
    }

    /// The strict in-order plan, for turns that persist or restore a snapshot (rare: a follower
    /// far behind). Every action that must follow a persist is preceded by its write.
    mutating func planInOrder(_ actions: [Action]) -> [HostEffect] {
        var effects: [HostEffect] = []
        // A deferred apply first: entries committed before this turn's snapshot work.
        if !deferredApply.isEmpty {
            effects.append(.apply(deferredApply, metaSync: true))
            deferredApply = []
        }
        for action in actions {
            switch action {
            case .persistHardState(let hs):
                pendingHard = hs
            case .persistEntries(let entries):
                buffer(entries)
            case .persistSnapshot(let snapshot, let discardLog):
                effects += flush(applying: [])
                if discardLog {
                    effects.append(.installSnapshot(snapshot, tail: tail(after: snapshot)))
                } else {
                    effects.append(.compacted(snapshot))
                }
            case .stageSnapshotChunk(let chunk):
                effects.append(.stageSnapshotChunk(chunk))
            case .restoreSnapshot(let snapshot):
                effects += flush(applying: [])
                effects.append(.restoredSnapshot(snapshot))
            case .send(let message):
                effects += flush(applying: [])
                effects.append(.send(message))
            case .sendSnapshotChunk(let request):
                effects += flush(applying: [])
                effects.append(.sendSnapshotChunk(request))
            case .prepareSnapshot:
                effects += prepare()
            case .apply(let entries):
                effects += flush(applying: [])
                if !entries.isEmpty { effects.append(.apply(entries, metaSync: true)) }
            case .readReady(let id, let index):
                effects += flush(applying: [])
                effects.append(.readReady(id: id, index: index))
            case .readFailed(let id):
                effects.append(.readFailed(id: id))
            case .proposalAccepted, .proposalRejected:
                break  // answered by `.event`
            }
        }
        effects += flush(applying: [])
        return effects
    }

    /// The entries to store after installing `snapshot`: what Raft's log holds after it. Raft's
    /// log may already be past it: a turn's inputs are all stepped before its plan is performed,
    /// so a newer snapshot (resent after a reconnect; small ones are one chunk) can be restored
    /// in the same turn; its own `.installSnapshot` comes later in this plan, and the entries
    /// between the two are not in Raft's log any more and not needed. (Asking the log for them
    /// trapped: the crash the fault campaign found, RELIABILITY.md.)
    func tail(after snapshot: SnapshotMetadata) -> [LogEntry] {
        guard node.log.snapshotIndex <= snapshot.index else { return [] }
        return Array(node.log.entries(from: snapshot.index + 1, through: node.log.lastIndex))
    }

    /// Later persists replace earlier ones from their first index on (Action.swift).
    private mutating func buffer(_ new: [LogEntry]) {
        guard let first = new.first else { return }
        pendingEntries.removeAll { $0.index >= first.index }
        pendingEntries += new
    }

    /// Whether the buffered persists need a write (new entries, or a new term or vote).
    private var mustPersist: Bool {
        !pendingEntries.isEmpty || pendingHard.map { $0.term != durableHard.term || $0.votedFor != durableHard.votedFor } == true
    }

    /// The write of everything buffered (and `apply` in it), if anything needs one.
    private mutating func flush(applying apply: [LogEntry]) -> [HostEffect] {
        var write = HostPersist()
        if let hs = pendingHard {
            pendingHard = nil
            if hs.term != durableHard.term || hs.votedFor != durableHard.votedFor { write.hardState = hs }
            durableHard = hs
        }
        write.entries = pendingEntries
        pendingEntries = []
        if write.hardState == nil && write.entries.isEmpty {
            return apply.isEmpty ? [] : [.apply(apply, metaSync: true)]
        }
        write.apply = apply
        return [.persist(write)]
    }
}

extension Action {
    /// Snapshot actions must be planned strictly in order with the rest (`planInOrder`).
    var touchesSnapshot: Bool {
        switch self {
        case .persistSnapshot, .restoreSnapshot, .stageSnapshotChunk: return true
        default: return false
        }
    }
}
