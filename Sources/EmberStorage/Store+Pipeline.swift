import EmberCore

/// Receives the results of pipelined writes (`EmberStore.enqueue`). Called on the writer thread
/// after the commit is durable and after the commit's listeners ran, once per commit with all of
/// this sink's writes in it, in queue order. Must not block (it holds up the next commit).
public protocol CommitSink: AnyObject, Sendable {
    func committed(_ results: [(tag: UInt64, result: Result<WriteResult, any Error>)])
}

/// One write of a pipelined burst.
public struct PipelinedWrite: Sendable {
    public var namespace: String
    public var operation: WriteOperation
    public var auth: WriteAuth
    /// The client's name for the write (exactly-once), if it gave one.
    public var writer: WriterStamp?
    /// Handed back with the result (the caller's request id).
    public var tag: UInt64

    public init(namespace: String, operation: WriteOperation, auth: WriteAuth = .admin, writer: WriterStamp? = nil, tag: UInt64) {
        self.namespace = namespace
        self.operation = operation
        self.auth = auth
        self.writer = writer
        self.tag = tag
    }
}

extension EmberStore {
    /// Queues a burst of writes for group commit without awaiting them: one queue lock and at most
    /// one wake-up of the writer for the whole burst, no task or continuation per write. Each
    /// write is validated here (as `submit` does); the writes that fail validation, or find the
    /// queue closed or full, are returned with their errors and never reach the log. The others
    /// are ordered after everything queued before this call and their results reach `sink`
    /// (see `CommitSink`), each only after its commit is durable.
    public func enqueue(_ writes: [PipelinedWrite], sink: any CommitSink) -> [(tag: UInt64, error: any Error)] {
        var refused: [(tag: UInt64, error: any Error)] = []
        var jobs: [Job] = []
        jobs.reserveCapacity(writes.count)
        for w in writes {
            do {
                let prepared = try prepare(namespace: w.namespace, operation: w.operation, auth: w.auth, writer: w.writer)
                jobs.append(.submit(Submission(namespace: w.namespace, operation: w.operation, auth: w.auth, writer: w.writer,
                                                prepared: prepared, completion: .sink(sink, w.tag))))
            } catch {
                refused.append((w.tag, error))
            }
        }
        if jobs.isEmpty { return refused }
        let (accepted, wake, closed): (Int, Bool, Bool) = core.queue.withLock { q in
            if q.closed { return (0, false, true) }
            let room = max(0, options.maxPendingWrites - q.pending.count)
            let n = min(room, jobs.count)
            if n == jobs.count { q.pending.append(contentsOf: jobs) } else { q.pending.append(contentsOf: jobs[..<n]) }
            return (n, n > 0 && q.takeWake(), false)
        }
        if wake { self.wake.signal() }
        if accepted < jobs.count {
            let err: StorageError = closed ? .closed : .queueFull(limit: options.maxPendingWrites)
            if !closed { core.metricsState.withLock { $0.queueRejections += UInt64(jobs.count - accepted) } }
            for case .submit(let sub) in jobs[accepted...] { if case .sink(_, let tag) = sub.completion { refused.append((tag, err)) } }
        }
        return refused
    }
}
