import EmberCore
import EmberProtocol
import NIOCore
import Synchronization

/// A connection's pipelined writes (Firebase SDKs send `p`/`m` requests without waiting for the
/// answers): each goes to the store's group-commit queue as it is read, with no task or wait per
/// write, and the responses leave in request order, each once its commit is durable — the
/// writes of one commit answered together.
///
/// Ordering: writes are queued in arrival order, so the log holds them in that order. Any other
/// request (listen, get, auth, onDisconnect, ...) first waits until the writes before it are
/// answered (`drained`), so it sees their effects and its response follows theirs.
struct WirePipeline: Sendable {
    let writer: any PipelinedWriter
    let responses: WireResponses

    /// nil when the write port has no pipelined writes (both node stores have them: `LMDBDataStore`
    /// and, in a cluster, `ReplicatedDataStore`); then writes are awaited one by one.
    init?(writer port: any WritePort, session: RealtimeSession) {
        let responses = WireResponses(session: session, limit: session.limits.maxPipelinedWrites)
        // Behind the commit's changes on the node's feed: a listener hears of a write before
        // its writer's ack (both share the session's ordered queue).
        let sink: any WriteOutcomeSink = session.feed.map { FeedOrderedSink(feed: $0, sink: responses) } ?? responses
        guard let writer = port.pipelinedWriter(sink: sink) else { return nil }
        self.writer = writer
        self.responses = responses
    }

    /// Queues one write of request `r`; returns at once unless `maxPipelinedWrites` writes are
    /// unanswered, then waits for room (the socket is not read meanwhile: TCP backpressure).
    func submit(r: Int64, _ request: WriteRequest) async {
        await responses.waitForRoom()
        enqueue(burst: [(responses.reserve(r: r, path: request.path), request)])
    }

    /// Returns once every write queued so far is answered.
    func drained() async { await responses.waitForDrain() }

    /// Queues writes whose response slots are taken (`WireResponses.reserve`), in one hand-off to
    /// the store; the ones it refuses are answered in their turn.
    func enqueue(burst: [(tag: UInt64, request: WriteRequest)]) {
        guard !burst.isEmpty else { return }
        let refused = writer.enqueue(burst)
        if !refused.isEmpty { responses.completed(refused.map { ($0.tag, .failure($0.error)) }) }
    }
}

/// The ordered responses of a connection's pipelined writes, and the sink their outcomes reach
/// (on the store's commit thread). The order is the protocol's (`WireAckQueue`); this holds it
/// under its own lock (completions come from the commit thread, reservations from the reader) and
/// wakes the waiters.
final class WireResponses: WriteOutcomeSink {
    struct State {
        var acks: WireAckQueue
        var drainWaiters: [CheckedContinuation<Void, Never>] = []
        var roomWaiter: CheckedContinuation<Void, Never>?
    }

    let session: RealtimeSession
    /// Named limit: unanswered writes per connection (`RealtimeSession.Limits.maxPipelinedWrites`).
    let limit: Int
    private let state: Mutex<State>

    init(session: RealtimeSession, limit: Int) {
        self.session = session
        self.limit = limit
        state = Mutex(State(acks: WireAckQueue(limit: limit)))
    }

    /// Takes the next response slot. Callers make sure one is free (`waitForRoom`, `hasRoom`):
    /// only the session's task or, while no task runs, its event loop reserves, and completions
    /// only free slots meanwhile.
    func reserve(r: Int64, path: Path) -> UInt64 {
        state.withLock { $0.acks.reserve(r: r, path: path) }
    }

    /// Fewer than `limit` writes are unanswered.
    var hasRoom: Bool { state.withLock { $0.acks.hasRoom } }

    func completed(_ outcomes: [(tag: UInt64, outcome: Result<EmberNodeStore.WriteOutcome, any Error>)]) {
        state.withLock { s in
            // Answered in request order; under this lock, so answers from the commit thread and
            // refusals from the reader cannot overtake each other.
            let frames = s.acks.complete(outcomes.map { ($0.tag, Self.completion($0.outcome)) })
            if !frames.isEmpty { session.send(frames: frames) }
            if s.acks.isEmpty {
                for w in s.drainWaiters { w.resume() }
                s.drainWaiters = []
            }
            if s.acks.hasRoom, let w = s.roomWaiter {
                s.roomWaiter = nil
                w.resume()
            }
        }
    }

    static func completion(_ outcome: Result<EmberNodeStore.WriteOutcome, any Error>) -> WireAckQueue.Completion {
        switch outcome {
        case .success(let o): o.applied ? .applied : .stale
        case .failure(let e): .failed(WireMessages.failure(e))
        }
    }

    func waitForDrain() async {
        if state.withLock({ $0.acks.isEmpty }) { return }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            state.withLock { s in
                if s.acks.isEmpty { c.resume() } else { s.drainWaiters.append(c) }
            }
        }
    }

    func waitForRoom() async {
        // Only completions change the count meanwhile, and they lower it.
        if state.withLock({ $0.acks.hasRoom }) { return }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            state.withLock { s in
                if s.acks.hasRoom { c.resume() } else { s.roomWaiter = c }
            }
        }
    }
}

/// Hands a commit's outcomes to `sink` on the change feed, after the commit's changes.
final class FeedOrderedSink: WriteOutcomeSink {
    let feed: ChangeFeed
    let sink: any WriteOutcomeSink

    init(feed: ChangeFeed, sink: any WriteOutcomeSink) {
        self.feed = feed
        self.sink = sink
    }

    func completed(_ outcomes: [(tag: UInt64, outcome: Result<WriteOutcome, any Error>)]) {
        let sink = self.sink
        // Results hold `any Error`, not `Sendable`: boxed for the hop to the feed's thread.
        let box = UncheckedOutcomes(outcomes)
        feed.enqueue { sink.completed(box.outcomes) }
    }
}

/// The outcomes of one commit crossing to the feed's thread (read there once, never shared).
struct UncheckedOutcomes: @unchecked Sendable {
    let outcomes: [(tag: UInt64, outcome: Result<WriteOutcome, any Error>)]
    init(_ outcomes: [(tag: UInt64, outcome: Result<WriteOutcome, any Error>)]) { self.outcomes = outcomes }
}
