import Synchronization

/// Bridges a completion callback to async/await. Cancelling the awaiting task stops the wait
/// with `CancellationError` (the operation itself still completes in the background), so a
/// caller — or a test's time limit — is never stuck on a reply that does not come.
func awaitCompletion<T: Sendable>(_ start: (@escaping @Sendable (Result<T, any Error>) -> Void) -> Void) async throws -> T {
    let box = ResumeOnce<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (cont: CheckedContinuation<T, any Error>) in
            box.attach(cont)
            start { box.resume($0) }
        }
    } onCancel: {
        box.resume(.failure(CancellationError()))
    }
}

/// Resumes a continuation exactly once, whichever comes first: the result or a cancellation
/// (which may arrive before the continuation is attached).
final class ResumeOnce<T: Sendable>: Sendable {
    private let state = Mutex<(cont: CheckedContinuation<T, any Error>?, early: Result<T, any Error>?, done: Bool)>((nil, nil, false))

    func attach(_ cont: CheckedContinuation<T, any Error>) {
        let early: Result<T, any Error>? = state.withLock { s in
            if let e = s.early {
                s.done = true
                return e
            }
            s.cont = cont
            return nil
        }
        if let early { cont.resume(with: early) }
    }

    func resume(_ result: Result<T, any Error>) {
        let cont: CheckedContinuation<T, any Error>? = state.withLock { s in
            guard !s.done else { return nil }
            if let c = s.cont {
                s.done = true
                s.cont = nil
                return c
            }
            if s.early == nil { s.early = result }
            return nil
        }
        cont?.resume(with: result)
    }
}
