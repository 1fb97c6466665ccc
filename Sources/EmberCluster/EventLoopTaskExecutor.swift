import NIOCore

/// Runs a task's jobs on one NIO event loop: the Raft host's loop runs on the peer transport's
/// event loop, where its inputs from peers arrive and its messages leave. A peer message then
/// resumes the loop without waking another thread, and the frames a turn sends are written by a
/// drain queued on the same thread, instead of a futex wake of a cooperative-pool thread for
/// every input and an eventfd wake of the event loop for every send (at one write per Raft
/// round, such hand-offs were most of a node's CPU per write).
///
/// Work the loop awaits elsewhere (the LMDB writer) resumes it here. Whatever runs on this
/// executor must not block for long: it holds up the loop's I/O (snapshot work runs detached).
/// The REST event streams use it too: an event resumes a stream's task on its connection's event
/// loop, which writes it at once, instead of on a cooperative-pool thread that then hands the
/// bytes to the event loop.
public final class EventLoopTaskExecutor: TaskExecutor, @unchecked Sendable {
    public let eventLoop: any EventLoop

    public init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
