import EmberCore
import EmberNodeStore
import EmberRaft
import EmberStorage

/// A client write waiting for the cluster. `payload` is an encoded storage `LogEntry` with the
/// namespace and operation; the leader fixes its timestamp when proposing.
struct PendingWrite: Sendable {
    var payload: [UInt8]
    /// The storage entry `payload` encodes (index, term and timestamp 0), when this node built it
    /// from the request: a leader appends its own writes from it, not from decoding `payload`.
    var entry: EmberStorage.LogEntry? = nil
    var reply: WriteReply
    /// Give up waiting for a leader after this.
    var leaderDeadline: ContinuousClock.Instant
    /// Give up waiting for the apply after this (outcome unknown).
    var deadline: ContinuousClock.Instant
}

/// A linearizable read waiting for its read index to be applied locally.
struct PendingRead: Sendable {
    var reply: CheckedContinuation<Void, any Error>
    var deadline: ContinuousClock.Instant
}

/// The driver's bookkeeping of client requests in flight (owned by the driver loop).
///
/// A write is in exactly one place: queued (not yet proposed or forwarded), in the forwarded
/// batch (sent to the leader, awaiting its reply), or awaiting the local apply of the index it
/// was appended at. The outcome is decided by the entry applied at that index: same term → it is
/// our write; other term → our entry was overwritten, so the write did not happen.
///
/// Order: writes leave the queue in arrival order, and a follower has at most one batch at the
/// leader at a time, so a node's writes enter the log in the order they reached it (a client's
/// pipelined writes stay in order even across leader changes: a bounced batch goes back to the
/// head of the queue).
struct RequestBook {
    /// Writes not yet proposed (leader) or forwarded (follower), oldest first, and the batch a
    /// follower has at the leader (EmberRaft's ForwardQueue: one batch in flight at a time).
    var forwarding = ForwardQueue<PendingWrite, ContinuousClock.Instant>()
    /// Followers' batches that reached us (leading) this turn: proposed with our own queue when
    /// the turn ends (`RaftHost.proposeTurn`), so never held across turns.
    var heldBatches: [ForwardBatch] = []
    var waiters: [UInt64: [(term: UInt64, write: PendingWrite)]] = [:]

    var reads: [UInt64: PendingRead] = [:]
    var readIssuedAt: [UInt64: ContinuousClock.Instant] = [:]
    var readsToRetry: Set<UInt64> = []
    /// Read ids start at a random point in each process: a ReadIndex answer meant for a read of
    /// this node's previous process (the leader answers late, and the peer link keeps frames
    /// across the reconnect to the restarted node) must not match a new read that happens to have
    /// the same number — it carries an old read index, and the new read would be served stale.
    /// (A fault campaign found such a read on a wiped follower replaying its log.)
    var nextReadID: UInt64 = UInt64.random(in: 1...(UInt64(1) << 62))

    /// Recent apply results, for forwarded writes whose reply arrives after the apply. Emptied
    /// once a batch is answered (`batchSettled`): the next batch's writes go in after anything
    /// applied by then.
    var recent: RecentResults

    /// A read index request with no answer after this is asked again.
    static let readRetryInterval = Duration.milliseconds(500)

    init(recentLimit: Int, recentMaxBytes: Int = RecentResults.defaultMaxBytes) {
        recent = RecentResults(capacity: recentLimit, maxBytes: recentMaxBytes)
    }

    mutating func park(_ w: PendingWrite) { forwarding.enqueue(w) }

    /// The write was appended at `index` in `term`; answer it when that index is applied here.
    mutating func awaitApply(index: UInt64, term: UInt64, _ w: PendingWrite, appliedIndex: UInt64) {
        if index <= appliedIndex {
            if let r = recent.result(at: index) {
                resolve(w, with: r, term: term)
            } else {
                w.reply.resume(throwing: ClusterError.outcomeUnknown("its index was applied too long ago"))
            }
            return
        }
        // Appended: the entry is in the log, and the write waits only for its outcome. Its
        // payload (a bulk import's chunk, MBs) is not kept for the wait.
        var w = w
        w.payload = []
        w.entry = nil
        waiters[index, default: []].append((term, w))
    }

    /// The state was replaced by a snapshot through `index`: writes waiting for an index it covers
    /// will never see their apply here. Their entries are in the snapshot or were overwritten
    /// before it; which one is not known here, so they fail as outcome unknown now rather than at
    /// their deadline. Remembered results stay valid: they are of committed entries.
    mutating func replacedBySnapshot(through index: UInt64) {
        for i in waiters.keys.filter({ $0 <= index }).sorted() {
            for (_, w) in waiters.removeValue(forKey: i)! {
                w.reply.resume(throwing: ClusterError.outcomeUnknown("a snapshot from the leader replaced this node's state before its apply"))
            }
        }
    }

    /// Whether `applied` has anything to do: a write waits for its result, or a forwarded batch
    /// is in flight (a learner, or a follower nobody writes through, has neither).
    var needsResults: Bool { !waiters.isEmpty || forwarding.inFlight != nil }

    mutating func applied(_ r: WriteResult) {
        if let ws = waiters.removeValue(forKey: r.index) {
            for (term, w) in ws { resolve(w, with: r, term: term) }
        }
        // Only a batch at the leader can be answered after its writes' apply (an answer to no
        // batch in flight is dropped), so with none in flight nothing needs this result later.
        if forwarding.inFlight != nil { remember(r) }
    }

    /// The batch at the leader was answered and its accepted writes handed to `awaitApply`: no
    /// result applied so far can answer a later batch (its writes are appended after the leader's
    /// log end, past everything this node applied), so none is kept.
    mutating func batchSettled() {
        recent.removeAll()
    }

    private func resolve(_ w: PendingWrite, with r: WriteResult, term: UInt64) {
        if r.term == term { w.reply.resume(returning: r) } else { w.reply.resume(throwing: ClusterError.leadershipLost) }
    }

    private mutating func remember(_ r: WriteResult) {
        // Kept to answer a forwarded write whose reply comes after its apply: the outcome, not
        // the change set listeners were fed from (the bulk of a result, and already published).
        var r = r
        r.changeSet = ChangeSet(namespace: r.namespace, changes: [])
        r.ran = []
        recent.insert(r)
    }

    // MARK: - Reads

    mutating func addRead(_ r: PendingRead) -> UInt64 {
        let id = nextReadID
        nextReadID += 1
        reads[id] = r
        return id
    }

    mutating func readReady(_ id: UInt64) {
        readIssuedAt[id] = nil
        readsToRetry.remove(id)
        reads.removeValue(forKey: id)?.reply.resume()
    }

    mutating func readFailed(_ id: UInt64) {
        if reads[id] != nil { readsToRetry.insert(id) }
    }

    /// Reads to ask again: failed ones and ones unanswered for `readRetryInterval`.
    mutating func readsDue(now: ContinuousClock.Instant) -> [UInt64] {
        let lost = readIssuedAt.filter { now - $0.value >= Self.readRetryInterval }.map(\.key)
        defer { readsToRetry = [] }
        return Array(readsToRetry.union(lost)).sorted()
    }

    // MARK: - Deadlines

    /// Fails every request past its deadline.
    mutating func expire(now: ContinuousClock.Instant, noLeaderSeconds: Double) {
        if forwarding.waiting.contains(where: { now >= $0.leaderDeadline }) {
            for w in forwarding.removeAll(where: { now >= $0.leaderDeadline }) {
                w.reply.resume(throwing: ClusterError.noLeader(seconds: noLeaderSeconds))
            }
        }
        for w in forwarding.expire(now: now) {
            w.reply.resume(throwing: ClusterError.outcomeUnknown("the leader did not answer"))
        }
        for (index, ws) in waiters {
            let (late, keep) = (ws.filter { now >= $0.write.deadline }, ws.filter { now < $0.write.deadline })
            for w in late { w.write.reply.resume(throwing: ClusterError.outcomeUnknown("not applied in time")) }
            waiters[index] = keep.isEmpty ? nil : keep
        }
        for (id, r) in reads where now >= r.deadline {
            reads[id] = nil
            readIssuedAt[id] = nil
            readsToRetry.remove(id)
            r.reply.resume(throwing: ClusterError.noLeader(seconds: noLeaderSeconds))
        }
    }

    mutating func failAll(_ error: any Error) {
        for w in forwarding.drain() { w.reply.resume(throwing: error) }
        for ws in waiters.values { for w in ws { w.write.reply.resume(throwing: error) } }
        for r in reads.values { r.reply.resume(throwing: error) }
        waiters = [:]; reads = [:]; readIssuedAt = [:]
    }
}


/// The results of the last `capacity` log indexes, in a ring addressed by index: applies come in
/// index order, so a slot is reused by the index `capacity` later (a dictionary with an eviction
/// queue cost a hash insert and removal per applied write, ~10 % of a follower's Raft thread
/// under pipelined load).
///
/// Bounded by bytes too (`maxBytes`, the values' approximate size): a result keeps the value the
/// client is answered with (a PATCH's whole patch), and a ring of 4,096 results of a bulk import's
/// 4 MB chunks held GBs (issue 42: the node the import wrote to grew +1.4 GiB for 256 MB). Past
/// the budget the ring is emptied: a late answer then finds no result and its write's outcome is
/// unknown, as for an index the ring no longer holds.
struct RecentResults {
    private var slots: [WriteResult?]
    private(set) var isEmpty = true
    /// The kept results' approximate bytes (`weight`).
    private(set) var bytes = 0
    let maxBytes: Int

    /// The default byte budget: a forwarded batch is at most 4 MiB of entries (one larger write
    /// up to 16 MiB); their results are what a late answer needs.
    static let defaultMaxBytes = 32 << 20

    init(capacity: Int, maxBytes: Int = Self.defaultMaxBytes) {
        precondition(capacity > 0 && maxBytes > 0)
        slots = Array(repeating: nil, count: capacity)
        self.maxBytes = maxBytes
    }

    mutating func insert(_ r: WriteResult) {
        let slot = Int(r.index % UInt64(slots.count))
        if let old = slots[slot] { bytes -= Self.weight(old, limit: .max) }
        slots[slot] = nil
        let w = Self.weight(r, limit: maxBytes)
        if bytes + w > maxBytes {
            removeAll()
            guard w <= maxBytes else { return }  // larger than the whole budget: not kept
        }
        slots[slot] = r
        bytes += w
        isEmpty = false
    }

    /// The result at `index`, if it is still kept.
    func result(at index: UInt64) -> WriteResult? {
        guard let r = slots[Int(index % UInt64(slots.count))], r.index == index else { return nil }
        return r
    }

    mutating func removeAll() {
        guard !isEmpty else { return }
        for i in slots.indices { slots[i] = nil }
        isEmpty = true
        bytes = 0
    }

    /// A result's approximate size: its value (or a failed condition's current value), counted
    /// until it exceeds `limit` (a weight past the budget needs no exact figure): exact when at
    /// most `limit`.
    static func weight(_ r: WriteResult, limit: Int) -> Int {
        var total = 128
        func add(_ node: Node) {
            var stack = [node]
            while let n = stack.popLast(), total <= limit {
                total += 48
                switch n.leaf {
                case .string(let s)?: total += s.utf8.count
                default: break
                }
                if case .string(let p)? = n.priority { total += p.utf8.count }
                for (key, child) in n.children {
                    total += 16 + key.utf8.count
                    stack.append(child)
                }
            }
        }
        // A value not built yet: its text (building it to weigh it would cost what it saves).
        if let patch = r.textPatch { total += patch.textBytes } else { add(r.value) }
        if case .conditionFailed(let current, _) = r.outcome { add(current) }
        return total
    }
}
