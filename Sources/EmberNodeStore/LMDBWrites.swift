import EmberCore
import EmberStorage

/// A single node's write port: every write is a log entry applied in the same transaction that
/// appends it (`EmberStore.submit`; bursts through the group-commit queue, `EmberStore.enqueue`).
struct LMDBWrites: WritePort {
    let store: EmberStore

    func write(_ request: WriteRequest) async throws -> WriteOutcome {
        try LMDBTranslation.refuseReserved(request.namespace)
        let result: WriteResult
        do {
            // The store fixes the entry's timestamp itself (monotonic across the log).
            var built: [Node]? = nil
            if case .updateText(_, let nodes) = request.kind { built = nodes }
            result = try await store.submit(namespace: request.namespace, LMDBTranslation.operation(for: request),
                                            auth: request.identity.writeAuth, writer: LMDBTranslation.stamp(request.writer),
                                            built: built)
        } catch let e as StorageError { throw LMDBTranslation.translate(e) }
        return try LMDBTranslation.outcome(of: result)
    }

    func pipelinedWriter(sink: any WriteOutcomeSink) -> (any PipelinedWriter)? {
        LMDBPipelinedWriter(store: store, sink: LMDBPipelinedWriter.OutcomeAdapter(sink: sink))
    }
}

/// Pipelined writes of the LMDB store: a burst goes to the group-commit queue in one call
/// (`EmberStore.enqueue`), and each commit hands its outcomes to the sink at once.
struct LMDBPipelinedWriter: PipelinedWriter {
    let store: EmberStore
    /// One per client, so a commit's results for that client arrive in one call.
    let sink: OutcomeAdapter

    func enqueue(_ writes: [(tag: UInt64, request: WriteRequest)]) -> [(tag: UInt64, error: any Error)] {
        var reserved: [(tag: UInt64, error: any Error)] = []
        let writes = writes.filter { w in
            do { try LMDBTranslation.refuseReserved(w.request.namespace); return true } catch {
                reserved.append((w.tag, error))
                return false
            }
        }
        guard !writes.isEmpty else { return reserved }
        let batch = writes.map { w in
            PipelinedWrite(namespace: w.request.namespace, operation: LMDBTranslation.operation(for: w.request),
                           auth: w.request.identity.writeAuth, writer: LMDBTranslation.stamp(w.request.writer), tag: w.tag)
        }
        let refused = store.enqueue(batch, sink: sink)
        return reserved + refused.map { r in (r.tag, (r.error as? StorageError).map(LMDBTranslation.translate) ?? r.error) }
    }

    /// Storage results as front outcomes (the same translation as `LMDBWrites.write`).
    final class OutcomeAdapter: CommitSink {
        let sink: any WriteOutcomeSink
        init(sink: any WriteOutcomeSink) { self.sink = sink }

        func committed(_ results: [(tag: UInt64, result: Result<WriteResult, any Error>)]) {
            sink.completed(results.map { r in
                (r.tag, Result {
                    switch r.result {
                    case .success(let w): return try LMDBTranslation.outcome(of: w)
                    case .failure(let e as StorageError): throw LMDBTranslation.translate(e)
                    case .failure(let e): throw e
                    }
                })
            })
        }
    }
}
