import NIOCore

/// Runs a task's jobs on one NIO event loop. The REST event streams use it: an event resumes a
/// stream's task on its connection's event loop, which writes it at once, instead of on a
/// cooperative-pool thread that then hands the bytes to the event loop. The Raft host's loop runs
/// on the peer transport's event loop the same way: a peer message resumes it without waking
/// another thread, and a turn's frames are written by a drain queued on the same thread.
/// Whatever runs on this executor must not block for long: it holds up the loop's I/O.
public final class EventLoopTaskExecutor: TaskExecutor, @unchecked Sendable {
    public let eventLoop: any EventLoop

    public init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
