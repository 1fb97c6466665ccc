import Dispatch
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

/// Runs a connection task's jobs on the connection's NIO event loop (a task executor
/// preference, SE-0417), until the connection becomes a WebSocket.
///
/// An HTTP connection's task prefers its channel's event loop, so reading a request, answering
/// it and resuming after a durable commit happen on the thread that owns the socket: a REST
/// write costs one wake-up of that loop (by the writer thread, when the commit is durable)
/// instead of hand-offs loop → cooperative pool → writer → pool → loop. Work that may block for
/// long (reads, large bodies, admin endpoints) goes back to the global pool
/// (`RestHandler.staysOnEventLoop`), so a slow request does not hold every connection of its loop.
/// A WebSocket session (reads, listens; its library's close handshake) runs on the pool as
/// before: the upgrade switches the executor there (`leaveLoop`, from `WebSocketGlue`).
///
/// Also a channel handler (passing everything through) so the upgrade can find it in the pipeline.
final class EventLoopTaskExecutor: TaskExecutor, ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    let loop: any EventLoop
    private let onLoop = Atomic<Bool>(true)

    init(_ loop: any EventLoop) { self.loop = loop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        if onLoop.load(ordering: .relaxed) {
            loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
        } else {
            DispatchQueue.global().async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
        }
    }

    /// From now on the task runs on the global pool (jobs already queued on the loop run there).
    func leaveLoop() { onLoop.store(false, ordering: .relaxed) }

    /// The executor of `channel`'s connection task, if it has one.
    static func of(_ channel: any Channel) -> EventLoopTaskExecutor? {
        guard channel.eventLoop.inEventLoop else { return nil }
        return try? channel.pipeline.syncOperations.handler(type: EventLoopTaskExecutor.self)
    }
}

extension RestHandler {
    /// Largest declared body a write is handled with on the event loop; larger (or chunked)
    /// bodies are collected and parsed on the global pool.
    static let maxEventLoopBodyBytes = 64 * 1024

    /// Runs `body` on the connection's event loop (its task's preference) when the request is a
    /// small data write, which does not block; anything else on the global pool, as every
    /// request ran before: reads (LMDB reads of up to `--max-read-mb`), streams, rules, admin
    /// and cluster endpoints, large bodies.
    static func onFittingExecutor(_ request: Request, _ respond: () async -> Response) async -> Response {
        if staysOnEventLoop(request) { return await respond() }
        var response = await withTaskExecutorPreference(globalConcurrentExecutor) { await respond() }
        // A streamed body (SSE: its first event is the whole location; a backup file) is written
        // after this returns, by the connection's task: on the pool too. Whole-buffer bodies
        // have a length and are written as they are.
        if response.body.contentLength == nil {
            let streamed = response.body
            response.body = ResponseBody { writer in
                try await withTaskExecutorPreference(globalConcurrentExecutor) { try await streamed.write(writer) }
            }
        }
        return response
    }

    static func staysOnEventLoop(_ request: Request) -> Bool {
        switch request.method {
        case .put, .patch, .delete: break
        case .post:
            // Only a POST may be overridden (into a read, say).
            if request.headers[methodOverride] != nil { return false }
            if let q = request.uri.query, q.utf8.contains(UInt8(ascii: "x")) && q.lowercased().contains("x-http-method-override") {
                return false
            }
        default: return false
        }
        if let cl = request.headers[.contentLength] {
            guard let n = Int(cl), n >= 0, n <= maxEventLoopBodyBytes else { return false }
        } else if request.method != .delete {
            return false
        }
        let path = request.uri.path
        return path.hasSuffix(".json") && !path.hasPrefix("/.")
    }

    static let methodOverride = HTTPField.Name("X-HTTP-Method-Override")!
}
