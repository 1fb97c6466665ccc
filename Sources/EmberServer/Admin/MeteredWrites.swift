import NIOCore
import Synchronization

/// The node's write port with write metrics: every client write (REST, WebSocket) passes here.
/// Two clock reads and a histogram update per write; nothing else on the path.
struct MeteredWrites: WritePort {
    let inner: any WritePort
    let metrics: NodeMetrics
    /// The alarms' refusals (CORRUPT: everything; NOSPACE: writes).
    let gate: AlarmGate

    func write(_ request: WriteRequest) async throws -> WriteOutcome {
        let start = ContinuousClock.now
        do {
            try gate.checkWrite()
            let outcome = try await inner.write(request)
            metrics.recordWrite(since: start, ok: true)
            return outcome
        } catch {
            metrics.recordWrite(since: start, ok: false)
            throw error
        }
    }

    var appliesFrontNodes: Bool { inner.appliesFrontNodes }

    func pipelinedWriter(sink: any WriteOutcomeSink) -> (any PipelinedWriter)? {
        let recorder = MeteredPipelinedWriter.Recorder(sink: sink, metrics: metrics)
        return inner.pipelinedWriter(sink: recorder).map { MeteredPipelinedWriter(inner: $0, recorder: recorder, gate: gate) }
    }
}

/// Pipelined writes with the same metrics as `write`: latency from queueing to the outcome.
struct MeteredPipelinedWriter: PipelinedWriter {
    let inner: any PipelinedWriter
    let recorder: Recorder
    let gate: AlarmGate

    func enqueue(_ writes: [(tag: UInt64, request: WriteRequest)]) -> [(tag: UInt64, error: any Error)] {
        let start = ContinuousClock.now
        do { try gate.checkWrite() } catch {
            // Refused before the store: not started, so the recorder keeps no slot for them.
            for _ in writes { recorder.metrics.recordWrite(since: start, ok: false) }
            return writes.map { ($0.tag, error) }
        }
        // Queued before the store sees them: an outcome can arrive before `enqueue` returns.
        recorder.started(writes.count, at: start)
        let refused = inner.enqueue(writes)
        recorder.refused(refused.count, since: start)
        return refused
    }

    /// Start times of the queued writes, oldest first (outcomes arrive in queue order).
    final class Recorder: WriteOutcomeSink {
        let sink: any WriteOutcomeSink
        let metrics: NodeMetrics
        /// One per wire connection: starts small (NIO's default is 16 slots, ~400 B per idle
        /// connection) and grows with the connection's writes in flight.
        private let starts = Mutex(CircularBuffer<ContinuousClock.Instant>(initialCapacity: 2))

        init(sink: any WriteOutcomeSink, metrics: NodeMetrics) {
            self.sink = sink
            self.metrics = metrics
        }

        func started(_ n: Int, at start: ContinuousClock.Instant) {
            starts.withLock { for _ in 0..<n { $0.append(start) } }
        }

        /// Refused writes leave the newest `n` slots (they were the last queued in this call).
        func refused(_ n: Int, since start: ContinuousClock.Instant) {
            guard n > 0 else { return }
            starts.withLock { $0.removeLast(n) }
            for _ in 0..<n { metrics.recordWrite(since: start, ok: false) }
        }

        func completed(_ outcomes: [(tag: UInt64, outcome: Result<WriteOutcome, any Error>)]) {
            let times = starts.withLock { s in (0..<outcomes.count).map { _ in s.isEmpty ? ContinuousClock.now : s.removeFirst() } }
            for (o, t) in zip(outcomes, times) {
                if case .success = o.outcome { metrics.recordWrite(since: t, ok: true) } else { metrics.recordWrite(since: t, ok: false) }
            }
            sink.completed(outcomes)
        }
    }
}
