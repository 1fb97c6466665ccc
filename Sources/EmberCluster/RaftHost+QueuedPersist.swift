import EmberNodeStore
import EmberRaft
import EmberRaftHost
import EmberStorage
import Foundation

/// Persists that the Raft loop does not wait for (issue 42). LMDB has one writer: while an
/// apply queued off the loop runs there (a bulk import's multi-MB entry: a second or more on a
/// busy machine), a persist queued after it waits for it. With the loop awaiting that persist, a
/// leader sent no heartbeats meanwhile and its followers campaigned (term 1 -> 2 in a 16 MB
/// import into 3 nodes: `ember import` keeps requests in flight, so the leader nearly always has
/// a chunk to persist).
///
/// So while a long apply is in flight, the turn's persist is queued on the writer too, and its
/// durability comes back as an input (etcd's raft does the same with asynchronous storage
/// writes). Until then every effect that must follow it (Action.swift contract 2: acks and votes
/// speak for what was written; applies, reads made ready, later persists) is held in order, and
/// only what may precede durability goes out: a leader's appends and heartbeats, a follower's
/// heartbeat answers. The leader counts its own copy only once `.persisted`, a follower
/// acknowledges an append only once it is durable. One persist is out at a time: what the turns
/// plan meanwhile is written together after it (group commit, as when the loop waited), and a
/// write that failed for lack of room is retried before anything queued after it.
struct PersistBook {
    /// The write queued on the store's writer and not yet durable.
    var writing: HostPersist?
    /// Effects planned after it that must wait for it, in order.
    var held: [HostEffect] = []
    /// When `writing` carries an apply: the entries answered when it was queued (`answerFloor`).
    /// The writer raises the store's applied index when that transaction commits, before the loop
    /// has answered its results.
    var answeredBeforeCarried: UInt64?
}

extension RaftHost {
    /// Effects held behind a queued persist at most; past it the loop waits for the persist (a
    /// turn plans a few effects; thousands mean the writer is stuck, and waiting bounds memory).
    static let maxHeldEffects = 4_096

    /// Whether `w` is queued without the loop waiting for it: while a long apply is queued on
    /// the writer (the write would wait behind it for its seconds; behind a short one the loop
    /// waits as it always did, and the apply of a small write rides in its append's
    /// transaction: one fsync per turn). Not on a learner (its write may store a batch
    /// without log rows, judged by the store's applied index once every apply is settled), nor
    /// while room is short (every storage call of the loop then waits for room in place).
    ///
    /// A follower whose syncs are slow waits for its write behind a short apply it queued on its
    /// own (two syncs: ~600 ms at 300 ms per sync). Its heartbeats are answered meanwhile by the
    /// transport's handler (`StalledLoopHeartbeats`), so its leader keeps its check-quorum.
    /// Queuing such persists off the loop instead (tried: on a follower while an apply it queued
    /// had not committed) cost 2 learners ~10 points of the cluster's write throughput in
    /// `ember-bench learners` (A/B 2026-11-30: 70.6 / 76.5 % with it, 81.8 / 88.3 % without): the
    /// off-loop mode kept coming back under CPU contention.
    func persistsOffLoop(_ w: HostPersist) -> Bool {
        longApplies.load(ordering: .relaxed) > 0 && !node.isLearner && !store.space.isShort
    }

    /// `write(w)` on the loop, with the transport's handler answering this follower's leader's
    /// heartbeats once the write has been out for `StalledLoopHeartbeats.answerAfter`.
    func writeAnsweringHeartbeats(_ w: HostPersist) async {
        // After the turn's steps: a term or vote this write makes durable is in the view already.
        let following = node.role == .follower ? node.leaderID : nil
        stalledHeartbeats.writeStarted(term: node.term, leader: following, now: .now)
        defer { stalledHeartbeats.writeEnded() }
        await write(w)
    }

    /// Queues `w`'s term, vote and entries on the writer. A small apply rides in the append's
    /// transaction (one sync, as on the loop; its results come back with the persist); a long
    /// one is held until they are durable (then queued off the loop as any apply:
    /// `apply(through:)`).
    func startPersist(_ w: HostPersist) {
        assert(persists.writing == nil, "one queued persist at a time")
        var write = w
        let carried = !w.apply.isEmpty && !Self.applyOffLoop(w.apply)
        // Kept when carried: a write that failed for lack of room is written again whole.
        if !carried { write.apply = [] }
        let raw: [EncodedEntry]
        do {
            defer { decoded.forget() }
            raw = try unapplied(w.entries).entries
        } catch {
            fatalStorage("append \(w.entries.first?.index ?? 0)...\(w.entries.last?.index ?? 0)", error)
        }
        let hard = w.hardState.map { EmberStorage.HardState(term: $0.term, votedFor: $0.votedFor) }
        persists.answeredBeforeCarried = carried ? answerFloor : nil
        persists.writing = write
        // Every entry was checked where it was proposed (`payload(for:)`, `stamp`); the writer
        // decodes those this host has not (a bad one comes back as the append's error).
        let through = carried ? w.apply.last!.index : 0
        let queued = store.startPersist(hardState: hard, encoded: raw, applyingThrough: through) { [weak self] result in
            guard let self else { return }
            self.persistOutcome.withLock { $0 = result }
            self.enqueue(.persistDone, force: true)
        }
        if !queued { fatalStorage("append", StorageError.closed) }
        if !carried && !w.apply.isEmpty { persists.held.append(.apply(w.apply, metaSync: true)) }
    }

    /// Holds `effect` until the queued persist is durable; past `maxHeldEffects` waits for it.
    func hold(_ effect: HostEffect) async {
        persists.held.append(effect)
        if persists.held.count >= Self.maxHeldEffects {
            await store.writerBarrier()
            await settlePersist()
        }
    }

    /// The queued persist came back: reported to Raft (its actions join the turn), or, when it
    /// failed for lack of room, written again on the loop (`write`: it waits for room); then
    /// what was held for it is performed.
    func settlePersist() async {
        guard let write = persists.writing, let result = persistOutcome.withLock({ r -> Result<[WriteResult], any Error>? in
            defer { r = nil }
            return r
        }) else { return }
        persists.writing = nil
        persists.answeredBeforeCarried = nil
        switch result {
        case .success(let results):
            // A carried apply's results, after those of the applies queued before it.
            answer(results)
            if let report = write.report { step(.persisted(through: report.index, term: report.term)) }
        case .failure(let error) where SpaceGuard.isNoSpace(error):
            // Nothing was queued after it (held), so the log stays a prefix.
            await self.write(write)
        case .failure(let error):
            fatalStorage("append \(write.entries.first?.index ?? 0)...\(write.entries.last?.index ?? 0)", error)
        }
        let held = persists.held
        persists.held = []
        await perform(Self.coalesced(held))
    }

    /// Waits for the queued persist and what was held for it (the loop's stop).
    func drainPersists() async {
        while persists.writing != nil {
            await store.writerBarrier()
            await settlePersist()
        }
    }

    /// Held effects with their persists written as one, where the first was: later persists
    /// replace earlier entries from their first index on (as `HostCore` buffers them), the last
    /// term and vote win, and the writes' applies ride in the merged write (applied sooner: a
    /// committed entry's apply may run any time after it is durable); every other effect keeps
    /// its order after that write. Effects after the first persist only wait longer: durable
    /// sooner never breaks the contract.
    static func coalesced(_ effects: [HostEffect]) -> [HostEffect] {
        guard let first = effects.firstIndex(where: { if case .persist = $0 { true } else { false } }) else { return effects }
        var merged = HostPersist()
        var after: [HostEffect] = []
        for effect in effects[first...] {
            guard case .persist(let w) = effect else {
                after.append(effect)
                continue
            }
            if let hard = w.hardState { merged.hardState = hard }
            if let from = w.entries.first?.index {
                merged.entries.removeAll { $0.index >= from }
                merged.entries += w.entries
            }
            // Applied in the merged write's transaction, as each would have been in its own: an
            // apply left after it would be queued alone and hold the next append behind its sync.
            // Applies go through an index, so a bare `.apply` left below one of them is a no-op.
            merged.apply += w.apply
        }
        return Array(effects[..<first]) + [.persist(merged)] + after
    }
}
