import NIOCore
import NIOPosix
import Synchronization

/// Threads that run clients' store reads (REST GET, the initial data of SSE streams, wire
/// listens and gets). An LMDB read of a large location is synchronous and may take a long time;
/// on Swift's cooperative pool (one thread per core) a few of them would stall every other task
/// of the node — writes, acks, pushes. Here they only hold their own threads, and a bounded
/// number wait: past the bound a read is refused at once (`StoreUnavailable`: REST 503, wire
/// status `unavailable`) instead of queueing without end.
public final class ReadPool: Sendable {
    public struct Limits: Sendable, Equatable {
        /// Reads that run at once (threads). Default: the number of cores, at least 2.
        public var threads = max(2, System.coreCount)
        /// Reads waiting for a thread; one more is refused.
        public var maxQueued = 1_000

        /// Bounds of the settings (emberd refuses flags outside them).
        public static let maxThreads = 1_024
        public static let maxQueueBound = 1_000_000

        public init() {}
    }

    public let limits: Limits
    private let pool: NIOThreadPool
    private enum Phase { case idle, started, stopped }
    /// Threads start on the first read, so a node that is built but never serves (tests) has none.
    private let phase = Mutex(Phase.idle)
    /// Reads running plus reads waiting.
    private let admitted = Atomic<Int>(0)

    public init(limits: Limits = Limits()) {
        precondition(limits.threads >= 1 && limits.maxQueued >= 0, "a read pool needs a thread and a non-negative queue bound")
        self.limits = limits
        self.pool = NIOThreadPool(numberOfThreads: limits.threads)
    }

    /// The refusal of a read past the queue bound.
    public var refusal: String {
        "Too many reads in progress on this node (\(limits.threads) running, \(limits.maxQueued) waiting); retry later"
    }

    /// Reads running or waiting now (for tests and metrics).
    public var inFlight: Int { admitted.load(ordering: .relaxed) }

    /// Runs `body` (blocking store work) on a pool thread and returns its result. Throws
    /// `StoreUnavailable` when `maxQueued` reads already wait, or once the pool is shut down; a
    /// cancelled caller's read is dropped if it has not started.
    /// `continuing`: a later step of work admitted before (the next chunk of a streamed read,
    /// whose number the store bounds): it waits for a thread rather than being refused, which
    /// would cut an answer already under way.
    public func run<T: Sendable>(continuing: Bool = false, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        let before = admitted.wrappingAdd(1, ordering: .relaxed).oldValue
        defer { admitted.wrappingSubtract(1, ordering: .relaxed) }
        guard continuing || before < limits.threads + limits.maxQueued else { throw StoreUnavailable(refusal) }
        let running = phase.withLock { p -> Bool in
            if p == .idle {
                pool.start()
                p = .started
            }
            return p == .started
        }
        guard running else { throw StoreUnavailable(Self.stopped) }
        do {
            return try await pool.runIfActive(body)
        } catch is CancellationError where phase.withLock({ $0 == .stopped }) {
            // Submitted while the pool was shutting down (NIO reports that as a cancellation).
            throw StoreUnavailable(Self.stopped)
        }
    }

    static let stopped = "The node is shutting down"

    /// Stops the threads after the reads already queued; later reads are refused.
    public func shutdown() async {
        let started = phase.withLock { p -> Bool in
            defer { p = .stopped }
            return p == .started
        }
        if started { try? await pool.shutdownGracefully() }
    }
}
