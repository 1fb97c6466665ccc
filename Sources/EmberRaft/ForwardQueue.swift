/// A node's client writes on their way into the log (pure: no I/O, time is the caller's).
///
/// A leader proposes from the head; a follower forwards to the leader in batches, ONE batch at a
/// time: the next batch leaves only once the leader answered the last one (or it timed out). With
/// a FIFO link to the leader this keeps a node's writes in the order they reached it, also across
/// leader changes — a batch the receiver bounces (it does not lead) comes back to the head of the
/// queue with everything after it, and is sent again before anything newer. The leader answers a
/// batch write by write: accepted (appended at an index in a term; it took effect iff the entry
/// applied there has that term), refused for good, or bounced (and then so is every later write
/// of the batch, so a bounced suffix is never proposed behind an accepted later write).
///
/// Used by the cluster runtime (EmberCluster's RaftHost) and by the simulator (EmberRaftSim),
/// which checks under faults that every write is applied at most once and in order.
public struct ForwardQueue<Write, Instant: Comparable> {
    /// A batch at the leader, awaiting its answer until `deadline`.
    public struct Batch {
        public let id: UInt64
        public let to: NodeID
        public let writes: [Write]
        public let deadline: Instant
    }

    /// What became of a forwarded batch's writes once answered.
    public struct Answer {
        /// Appended at the leader: each awaits the apply of its index.
        public var accepted: [(write: Write, index: UInt64, term: UInt64)] = []
        /// Refused for good (invalid): each fails with the reason.
        public var refused: [(write: Write, reason: String)] = []
        /// The reply left these out (a malformed answer): their outcome is unknown.
        public var unanswered: [Write] = []
        /// Set when the receiver bounced the batch from some write on (requeued at the head):
        /// the leader it named, if any.
        public var bounced: (hint: NodeID?, by: NodeID)?
    }

    /// Waiting writes from `head` on; the slots before it are consumed and hold nothing: a
    /// consumed write kept its payload alive until the prefix was dropped (a bulk import's
    /// multi-MB writes, up to 64 of them per node: issue 42).
    private var items: [Write?] = []
    private var head = 0
    public private(set) var inFlight: Batch?
    /// No batch leaves before this (set after a bounce that named no leader).
    public var pausedUntil: Instant?
    private var nextID: UInt64 = 1

    public init() {}

    /// Writes waiting (not in flight).
    public var count: Int { items.count - head }
    public var isEmpty: Bool { count == 0 }
    public var first: Write? { isEmpty ? nil : items[head] }
    public var waiting: LazyMapCollection<ArraySlice<Write?>, Write> { items[head...].lazy.map { $0! } }

    public mutating func enqueue(_ w: Write) { items.append(w) }

    /// Takes the head (a leader proposing it).
    @discardableResult
    public mutating func removeFirst() -> Write {
        precondition(!isEmpty, "removeFirst on an empty queue")
        let w = items[head]!
        items[head] = nil
        head += 1
        compactIfSparse()
        return w
    }

    /// Puts writes back at the head, keeping their order.
    public mutating func requeueFront(_ ws: some Collection<Write>) {
        guard !ws.isEmpty else { return }
        items = ws.map { Optional($0) } + items[head...]
        head = 0
    }

    /// The next batch from the head for `leader`, at least one write and then while within both
    /// limits; nil while a batch is in flight or paused, or with nothing waiting.
    public mutating func nextBatch(to leader: NodeID, now: Instant, deadline: Instant, maxWrites: Int, maxBytes: Int,
                                   size: (Write) -> Int) -> Batch? {
        precondition(maxWrites > 0 && maxBytes > 0, "batch limits must be positive")
        guard inFlight == nil, !isEmpty else { return nil }
        if let until = pausedUntil {
            guard now >= until else { return nil }
            pausedUntil = nil
        }
        var writes: [Write] = []
        var bytes = 0
        while let w = first, writes.isEmpty || (writes.count < maxWrites && bytes + size(w) <= maxBytes) {
            bytes += size(w)
            writes.append(removeFirst())
        }
        let batch = Batch(id: nextID, to: leader, writes: writes, deadline: deadline)
        nextID += 1
        inFlight = batch
        return batch
    }

    /// Settles the in-flight batch with the receiver's per-write results (nil: not the batch in
    /// flight — a late answer to one that timed out). Bounced writes go back to the head.
    public mutating func answered(batch id: UInt64, from: NodeID, results: [ForwardResult]) -> Answer? {
        guard let batch = inFlight, batch.id == id else { return nil }
        inFlight = nil
        var answer = Answer()
        for (i, w) in batch.writes.enumerated() {
            guard i < results.count else {
                answer.unanswered.append(w)
                continue
            }
            switch results[i] {
            case .accepted(let index, let term): answer.accepted.append((w, index, term))
            case .refused(let why): answer.refused.append((w, why))
            case .notLeader(let hint):
                requeueFront(batch.writes[i...])
                answer.bounced = (hint, from)
                return answer
            }
        }
        return answer
    }

    /// The in-flight batch's writes when its deadline passed (their outcome is unknown).
    public mutating func expire(now: Instant) -> [Write] {
        guard let batch = inFlight, now >= batch.deadline else { return [] }
        inFlight = nil
        return batch.writes
    }

    /// Removes waiting writes matching `predicate` (e.g. past their deadline), in order.
    public mutating func removeAll(where predicate: (Write) -> Bool) -> [Write] {
        var kept: [Write?] = []
        var removed: [Write] = []
        for case let w? in items[head...] {
            if predicate(w) { removed.append(w) } else { kept.append(w) }
        }
        items = kept
        head = 0
        return removed
    }

    /// Everything, waiting and in flight (a stopping node fails them).
    public mutating func drain() -> [Write] {
        let all = (inFlight?.writes ?? []) + Array(waiting)
        items = []
        head = 0
        inFlight = nil
        return all
    }

    /// Drops the consumed prefix once it is most of the storage (amortised O(1) pops), and at
    /// once when nothing waits (the usual case: the next write starts at slot 0).
    private mutating func compactIfSparse() {
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 64 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
    }
}

/// The leader's answer for one forwarded write.
public enum ForwardResult: Sendable, Hashable {
    /// Appended at `index` in `term`; it took effect iff the entry applied there has `term`.
    case accepted(index: UInt64, term: UInt64)
    /// The receiver is not the leader; `hint` is the leader it knows of.
    case notLeader(hint: NodeID?)
    /// Refused for good (invalid payload): retrying elsewhere will not help.
    case refused(String)
}
