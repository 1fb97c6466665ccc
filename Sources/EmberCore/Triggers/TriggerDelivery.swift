/// One trigger's delivery decisions without I/O (the worker does the POSTs and logs the
/// cursor): which events go out in which POST, when a failed POST is retried (exponential
/// backoff from `backoffMs` up to `maxBackoffMs`, each wait jittered), and when events are
/// settled — delivered, or dead after `retries` retries — so the worker may log the trigger's
/// cursor past them. Time comes in as milliseconds (`now`) and randomness as a seed, so tests
/// drive both and replay them.
///
/// Events come in log order, in groups of one log entry (an entry that changed N locations
/// gives N events). An entry is settled only once all of its events are: the cursor moves in
/// whole entries, so after a failover an entry is delivered again from its first event (same
/// ids: at least once).
public struct TriggerDelivery: Sendable {
    public struct Event: Sendable, Equatable {
        public var index: UInt64
        public var seq: Int
        /// The last event of its entry.
        public var last: Bool
        public init(index: UInt64, seq: Int, last: Bool) {
            self.index = index
            self.seq = seq
            self.last = last
        }
    }

    public enum Action: Sendable, Equatable {
        /// POST these events (in one request) and report `completed(batch:)`.
        case send(batch: UInt64, events: [Event])
        /// Log the cursor past these entries (their events delivered, or dead with this reason).
        case settle(indexes: [UInt64], deadLetter: String?)
        /// The definition says stop: delivery waits at the failing event until resumed.
        case halt(reason: String)
    }

    struct Batch {
        var id: UInt64
        var events: [Event]
        var attempts = 0
        var inFlight = false
        var retryAt: Int64?
        /// Delivered (nil) or dead with this reason, once finished.
        var outcome: String??
        /// Sent behind a batch that failed since: sent again after it, whatever its receiver
        /// answers this time (go-back-N keeps a window's deliveries in log order).
        var resend = false
    }

    public let limits: TriggerLimits
    /// Events taken in and not yet sent: those from `queueStart` on (a batch leaves from the
    /// front without moving the rest; the array is compacted once half of it is gone).
    private var queue: [Event] = []
    private var queueStart = 0
    private var batches: [Batch] = []
    /// The dead-letter reason of the entry whose events are being settled, when one of those
    /// settled so far died (an entry's events may span batches).
    private var entryDead: String?
    private var nextBatch: UInt64 = 1
    public private(set) var halted: String?
    public private(set) var lastError: String?
    /// The highest index taken in (the worker reads the outbox after it).
    public private(set) var takenThrough: UInt64 = 0
    /// The jitter's generator (SplitMix64): seeded by the worker, by tests with a fixed seed.
    private var rngState: UInt64

    /// Named limit: entries per `settle` action (the log entry that carries it stays small).
    public static let maxSettle = 1_000

    /// Named limit: the longest (ms) a batching trigger holds back a batch smaller than its
    /// `batchSize` while one of its POSTs is in flight. Under load a POST's answer comes back
    /// with more events queued behind it, and one POST then carries them all: each POST costs
    /// the leader (and the receiver) a request, a signature's setup, a wakeup and an answer
    /// whatever it carries, and a lane that sent whatever one commit brought sent a few events
    /// per POST. With nothing in flight (a light load) a batch goes at once: no added latency.
    public static let maxLingerMs: Int64 = 5
    /// When the queue's first event began to wait for a fuller batch (nil: none waits so).
    private var lingerSince: Int64?

    /// `seed`: the retry jitter's randomness (the worker passes a random one).
    public init(limits: TriggerLimits, seed: UInt64) {
        self.limits = limits
        self.rngState = seed
    }

    /// Nothing queued, in flight, waiting or unsettled.
    public var isIdle: Bool { queued == 0 && batches.isEmpty }

    /// Events queued (taken in, not yet sent).
    var queued: Int { queue.count - queueStart }

    /// Named limit: events queued (taken in, not yet sent) at most, whatever the batch size and
    /// window: the worker holds their data in memory.
    public static let maxQueued = 10_000

    /// Events the worker should add now (0: enough queued): two windows' worth.
    public var wants: Int {
        halted != nil ? 0 : max(0, min(limits.batchSize * limits.inFlight * 2, Self.maxQueued) - queued)
    }

    /// Takes in one entry's events (log order, after everything taken before).
    public mutating func take(index: UInt64, events count: Int) {
        precondition(count > 0, "an outbox entry holds at least one event")
        precondition(index > takenThrough || isIdle, "entries come in log order")
        for s in 0..<count { queue.append(Event(index: index, seq: s, last: s == count - 1)) }
        takenThrough = index
    }

    /// Forgets everything not yet settled (a new leader's worker, a resume): the worker reads
    /// the outbox again.
    public mutating func reset() {
        queue = []; queueStart = 0; batches = []; entryDead = nil; halted = nil; takenThrough = 0; lingerSince = nil
    }

    /// A partial batch waits for a POST in flight to be answered (`maxLingerMs` at most, from
    /// `lingerSince`): the worker need not read more events for it until that answer or
    /// `nextWake`, and need not be woken by every commit meanwhile.
    public func lingers(now: Int64) -> Bool {
        guard halted == nil, let since = lingerSince, queued > 0, queued < limits.batchSize else { return false }
        let inFlight = batches.contains(where: \.inFlight)
        return (inFlight || limits.batchWindowMs > 0) && now - since < wait(inFlight: inFlight)
    }

    /// Whether the worker need not read more events until a POST's answer or `nextWake`: a
    /// partial batch lingers behind a POST in flight (`lingers`) for at most `maxLingerMs`. Not
    /// with a batching window: a batch that fills meanwhile goes at once, so the worker reads
    /// what each commit brings (a read per commit; the POSTs are what the window saves).
    public func readsWait(now: Int64) -> Bool {
        limits.batchWindowMs == 0 && lingers(now: now)
    }

    /// How long (ms) a partial batch waits from `lingerSince`: the trigger's `batchWindowMs`,
    /// and behind a POST in flight at least `maxLingerMs`.
    func wait(inFlight: Bool) -> Int64 {
        let window = Int64(limits.batchWindowMs)
        return inFlight ? max(Self.maxLingerMs, window) : window
    }

    /// The nominal wait after `n` failed attempts: `backoffMs` doubled per attempt, at most
    /// `maxBackoffMs`.
    public func backoff(afterAttempts n: Int) -> Int64 {
        var d = Int64(limits.backoffMs)
        for _ in 1..<max(1, n) where d < Int64(limits.maxBackoffMs) { d *= 2 }
        return min(d, Int64(limits.maxBackoffMs))
    }

    /// The wait actually used: drawn uniformly from [nominal/2, nominal] ("equal jitter"), so the
    /// triggers (and the batches of one trigger) that failed together against a receiver that went
    /// down do not all retry in the same millisecond when it comes back, and the doubling still
    /// bounds the attempts an outage costs.
    mutating func jitteredBackoff(afterAttempts n: Int) -> Int64 {
        let d = backoff(afterAttempts: n)
        let half = d / 2
        return d - half + Int64(nextRandom() % UInt64(half + 1))
    }

    /// SplitMix64 (Steele, Lea and Flood's published constants).
    private mutating func nextRandom() -> UInt64 {
        rngState &+= 0x9E37_79B9_7F4A_7C15
        var z = rngState
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// What to do at `now`: retries that are due, in log order (a retry not yet due holds back
    /// those after it), and new POSTs while the window has room and no POST waits for a retry
    /// (a failing receiver is not sent later events meanwhile).
    public mutating func poll(now: Int64) -> [Action] {
        guard halted == nil else { return [] }
        var out: [Action] = []
        var inFlight = batches.filter(\.inFlight).count
        for i in batches.indices where batches[i].outcome == nil {
            // One in flight that must go again: nothing behind it may go before it does.
            if batches[i].inFlight { if batches[i].resend { break } else { continue } }
            guard let at = batches[i].retryAt, at <= now, inFlight < limits.inFlight else { break }
            batches[i].inFlight = true
            batches[i].retryAt = nil
            inFlight += 1
            out.append(.send(batch: batches[i].id, events: batches[i].events))
        }
        let waiting = batches.contains { $0.retryAt != nil || $0.resend }
        while !waiting && inFlight < limits.inFlight && queued > 0 {
            let n = min(limits.batchSize, queued)
            // Under load (a POST in flight) a partial batch waits to fill, `maxLingerMs` at most;
            // with a batching window, until its first event waited the window.
            if n < limits.batchSize && (inFlight > 0 || limits.batchWindowMs > 0) {
                let since = lingerSince ?? now
                lingerSince = since
                if now - since < wait(inFlight: inFlight > 0) { break }
            }
            lingerSince = nil
            let b = Batch(id: nextBatch, events: Array(queue[queueStart..<(queueStart + n)]), inFlight: true)
            queueStart += n
            if queueStart == queue.count {
                queue.removeAll(keepingCapacity: true)
                queueStart = 0
            } else if queueStart * 2 > queue.count {
                queue.removeFirst(queueStart)
                queueStart = 0
            }
            nextBatch += 1
            batches.append(b)
            inFlight += 1
            out.append(.send(batch: b.id, events: b.events))
        }
        return out
    }

    /// When `poll` has something to do next without new input (a retry's time, or a lingering
    /// batch's end), if ever. The first waiting batch's: later ones wait behind it; none while
    /// the window is full (a completion comes first).
    public var nextWake: Int64? {
        guard halted == nil, batches.lazy.filter(\.inFlight).count < limits.inFlight else { return nil }
        guard let first = batches.first(where: { $0.outcome == nil && (!$0.inFlight || $0.resend) }) else {
            // A partial batch lingering: sent when its wait ends, if no answer comes first.
            return queued == 0 ? nil : lingerSince.map { $0 + wait(inFlight: batches.contains(where: \.inFlight)) }
        }
        return first.inFlight ? nil : first.retryAt
    }

    /// A POST finished: `error` nil for a 2xx, else why it failed (kept as `lastError`).
    ///
    /// With a window (`inFlight` > 1) the batches behind a failed one were sent after it: they
    /// are sent again after its retry, in order, with the same ids (whatever their receiver
    /// answered), so the receiver sees the trigger's events in log order once more.
    public mutating func completed(batch id: UInt64, error: String?, now: Int64) -> [Action] {
        guard let i = batches.firstIndex(where: { $0.id == id }), batches[i].inFlight else { return [] }
        batches[i].inFlight = false
        if batches[i].resend {
            batches[i].resend = false
            if let error { lastError = error }
            batches[i].retryAt = now
            return []
        }
        if let error {
            lastError = error
            batches[i].attempts += 1
            if batches[i].attempts > limits.retries {
                switch limits.onFailure {
                case .continue:
                    batches[i].outcome = .some("\(error) (after \(batches[i].attempts) attempts)")
                case .stop:
                    halted = "\(error) (after \(batches[i].attempts) attempts)"
                    return [.halt(reason: halted!)]
                }
            } else {
                batches[i].retryAt = now + jitteredBackoff(afterAttempts: batches[i].attempts)
                goBack(after: i, now: now)
                return []
            }
        } else {
            batches[i].outcome = .some(nil)
        }
        return settle()
    }

    /// The batches after `i` go back to be sent again after it: those in flight once they
    /// finish, those delivered (not yet settled: `i` is before them) now.
    mutating func goBack(after i: Int, now: Int64) {
        for j in batches.indices where j > i {
            if batches[j].inFlight {
                batches[j].resend = true
            } else if batches[j].outcome == .some(nil) {
                batches[j].outcome = nil
                batches[j].retryAt = now
            }
        }
    }

    /// Finished batches at the front are settled, event by event in log order: entries whose
    /// events are all settled become `settle` actions, runs of delivered and dead entries apart
    /// (an entry is dead if any of its events is). Read straight from the batches: a list of
    /// settled events with their outcomes, copied per event, was a share of a busy lane's cost.
    mutating func settle() -> [Action] {
        var out: [Action] = []
        var run: [UInt64] = []
        var runReason: String?? = nil
        while let b = batches.first, let outcome = b.outcome {
            batches.removeFirst()
            for e in b.events {
                if e.seq == 0 { entryDead = nil }
                if let outcome { entryDead = outcome }
                guard e.last else { continue }
                // One entry complete.
                if let r = runReason, r != entryDead || run.count >= Self.maxSettle {
                    out.append(.settle(indexes: run, deadLetter: r))
                    run = []
                }
                runReason = .some(entryDead)
                run.append(e.index)
            }
        }
        if let r = runReason, !run.isEmpty { out.append(.settle(indexes: run, deadLetter: r)) }
        return out
    }
}
