import NIOCore

/// Runs a task's jobs on one NIO event loop. The REST event streams use it: an event resumes a
/// stream's task on its connection's event loop, which writes it at once, instead of on a
/// cooperative-pool thread that then hands the bytes to the event loop. Whatever runs on this
/// executor must not block: it holds up the loop's I/O.
///
/// (The Raft host's loop ran on the peer transport's event loop for a while — fewer wake-ups per
/// Raft round — and was taken back to the cooperative pool after a fault campaign found a stale
/// linearizable read on a wiped follower in that build; see BENCHMARKS.md, issue 12's notes.)
public final class EventLoopTaskExecutor: TaskExecutor, @unchecked Sendable {
    public let eventLoop: any EventLoop

    public init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
