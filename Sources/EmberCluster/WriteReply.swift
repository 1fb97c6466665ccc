import EmberNodeStore
import EmberStorage
import Synchronization

/// Where a cluster write's outcome goes: a caller awaiting it (REST, a wire write made alone),
/// or a pipelined writer's sink (a wire connection's burst of `p`/`m` requests), to which the
/// outcomes are handed in bulk once per driver turn.
enum WriteReply: Sendable {
    case waiter(CheckedContinuation<WriteResult, any Error>)
    /// `bytes`: the write's log entry, given back to admission control with its outcome.
    case sink(tag: UInt64, bytes: Int, ClusterPipelineSink)

    func resume(returning r: WriteResult) {
        switch self {
        case .waiter(let c): c.resume(returning: r)
        case .sink(let tag, let bytes, let s): s.add(tag, bytes: bytes, Result { try LMDBTranslation.outcome(of: r) })
        }
    }

    func resume(throwing e: any Error) {
        switch self {
        case .waiter(let c): c.resume(throwing: e)
        case .sink(let tag, let bytes, let s): s.add(tag, bytes: bytes, .failure(ClusterError.clientError(e)))
        }
    }
}

/// One pipelined writer's outcomes, buffered by the driver loop and handed to the connection's
/// sink at the end of the turn (one call, one lock, one socket write for the whole turn's answers).
///
/// `@unchecked Sendable`: `buffered` is touched only by the driver loop (outcomes are produced
/// nowhere else), like the rest of the loop's state.
final class ClusterPipelineSink: @unchecked Sendable {
    let sink: any WriteOutcomeSink
    let turn: SinkTurn
    /// Called with the number of outcomes handed over and their writes' bytes (admission
    /// control's count of pending writes).
    let released: @Sendable (Int, Int) -> Void
    private var buffered: [(tag: UInt64, outcome: Result<EmberNodeStore.WriteOutcome, any Error>)] = []
    private var bufferedBytes = 0

    init(sink: any WriteOutcomeSink, turn: SinkTurn, released: @escaping @Sendable (Int, Int) -> Void) {
        self.sink = sink
        self.turn = turn
        self.released = released
    }

    func add(_ tag: UInt64, bytes: Int, _ outcome: Result<EmberNodeStore.WriteOutcome, any Error>) {
        if buffered.isEmpty { turn.due.append(self) }
        buffered.append((tag, outcome))
        bufferedBytes += bytes
    }

    func flush() {
        guard !buffered.isEmpty else { return }
        let out = buffered
        buffered = []
        released(out.count, bufferedBytes)
        bufferedBytes = 0
        sink.completed(out)
    }
}

/// The sinks with outcomes buffered during the current driver turn (driver loop only).
final class SinkTurn: @unchecked Sendable {
    var due: [ClusterPipelineSink] = []

    func flushAll() {
        let sinks = due
        due = []
        for s in sinks { s.flush() }
    }
}

extension ClusterError {
    /// What a client is told: a refused write is its own fault (400), the rest are retryable (503).
    static func clientError(_ e: any Error) -> any Error {
        guard let c = e as? ClusterError else { return e }
        if case .refused(let why) = c {
            // The leader had no room (`PeerFrameRouter`): 507 as on the leader itself.
            if why.hasPrefix("NOSPACE: ") { return StoreRefusal(status: 507, message: why) }
            return StoreRefusal.badRequest(why)
        }
        return StoreUnavailable(c.description)
    }
}
