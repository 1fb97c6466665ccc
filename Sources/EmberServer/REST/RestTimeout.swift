import Synchronization

/// REST `timeout=` (reference §1.3): a read that is not answered within the deadline fails with
/// 400 and `{"error": ...}` instead of its data. The read itself is synchronous LMDB work that
/// cannot be interrupted; it finishes in the background and its result is dropped.
enum RestTimeout {
    /// Resumes a continuation once, from whichever side finishes first.
    private final class Race<T: Sendable>: Sendable {
        let slot = Mutex<CheckedContinuation<T, any Error>?>(nil)
        func finish(_ r: Result<T, any Error>) {
            let c = slot.withLock { s -> CheckedContinuation<T, any Error>? in
                defer { s = nil }
                return s
            }
            c?.resume(with: r)
        }
    }

    static func message(millis: Int) -> String { "The request did not complete within its timeout of \(millis) ms" }

    /// Runs `body`, or throws `RestError` 400 when `millis` pass first (nil: no deadline).
    static func run<T: Sendable>(millis: Int?, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        guard let millis else { return try await body() }
        let race = Race<T>()
        let tasks = Mutex<[Task<Void, Never>]>([])
        defer { for t in tasks.withLock({ $0 }) { t.cancel() } }
        return try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in
            race.slot.withLock { $0 = c }
            let work = Task {
                do { race.finish(.success(try await body())) } catch { race.finish(.failure(error)) }
            }
            let timer = Task {
                try? await Task.sleep(for: .milliseconds(millis))
                if !Task.isCancelled { race.finish(.failure(RestError.badRequest(message(millis: millis)))) }
            }
            tasks.withLock { $0 = [work, timer] }
        }
    }
}
