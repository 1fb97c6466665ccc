import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import EmberServer

/// Where REST requests run (`EventLoopTaskExecutor`, `RestHandler.onFittingExecutor`) and the
/// HTTP server's log handler (`DeferredMetadataLogHandler`).
@Suite struct RestExecutorTests {
    static func request(_ method: HTTPRequest.Method, _ path: String, _ fields: HTTPFields = [:]) -> Request {
        let head = HTTPRequest(method: method, scheme: "http", authority: "localhost", path: path, headerFields: fields)
        return Request(head: head, body: RequestBody(buffer: ByteBuffer()))
    }

    static func sized(_ n: Int, _ more: HTTPFields = [:]) -> HTTPFields {
        var f = more
        f[.contentLength] = "\(n)"
        return f
    }

    @Test func onlySmallDataWritesStayOnTheEventLoop() {
        #expect(RestHandler.staysOnEventLoop(Self.request(.put, "/a/b.json?print=silent", Self.sized(20))))
        #expect(RestHandler.staysOnEventLoop(Self.request(.patch, "/a.json", Self.sized(200))))
        #expect(RestHandler.staysOnEventLoop(Self.request(.post, "/a.json", Self.sized(3))))
        #expect(RestHandler.staysOnEventLoop(Self.request(.delete, "/a.json")))
        #expect(RestHandler.staysOnEventLoop(Self.request(.put, "/a.json", Self.sized(RestHandler.maxEventLoopBodyBytes))))
        // Reads, streams, large or unsized bodies, overridden POSTs, rules and node endpoints.
        #expect(!RestHandler.staysOnEventLoop(Self.request(.get, "/a.json")))
        #expect(!RestHandler.staysOnEventLoop(Self.request(.put, "/a.json", Self.sized(RestHandler.maxEventLoopBodyBytes + 1))))
        #expect(!RestHandler.staysOnEventLoop(Self.request(.put, "/a.json")))
        #expect(!RestHandler.staysOnEventLoop(Self.request(.put, "/a.json", Self.sized(-1))))
        #expect(!RestHandler.staysOnEventLoop(Self.request(.post, "/a.json?x-http-method-override=GET", Self.sized(0))))
        var override = Self.sized(0)
        override[RestHandler.methodOverride] = "GET"
        #expect(!RestHandler.staysOnEventLoop(Self.request(.post, "/a.json", override)))
        #expect(!RestHandler.staysOnEventLoop(Self.request(.put, "/.settings/rules.json", Self.sized(10))))
        #expect(!RestHandler.staysOnEventLoop(Self.request(.put, "/.ember/members", Self.sized(10))))
        #expect(!RestHandler.staysOnEventLoop(Self.request(.options, "/a.json")))
    }

    /// A task preferring the loop resumes there after a continuation completed on another
    /// thread (as the store's writer thread does); the global preference leaves the loop.
    @Test func aTaskPreferringTheLoopResumesOnIt() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let resumedOnLoop: Bool = await withTaskExecutorPreference(EventLoopTaskExecutor(loop)) {
            let before = loop.inEventLoop
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                Thread.detachNewThread { c.resume() }
            }
            return before && loop.inEventLoop
        }
        #expect(resumedOnLoop)
        let onPool: Bool = await withTaskExecutorPreference(EventLoopTaskExecutor(loop)) {
            await withTaskExecutorPreference(globalConcurrentExecutor) { loop.inEventLoop }
        }
        #expect(!onPool)
        // A connection that became a WebSocket leaves the loop for good.
        let executor = EventLoopTaskExecutor(loop)
        let afterLeaving: Bool = await withTaskExecutorPreference(executor) {
            executor.leaveLoop()
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                Thread.detachNewThread { c.resume() }
            }
            return loop.inEventLoop
        }
        #expect(!afterLeaving)
        try await group.shutdownGracefully()
    }

    /// Records what the wrapped handler is asked to log.
    final class Recorder: Sendable {
        let events = Mutex<[(String, Logger.Metadata?)]>([])
    }

    struct RecordingHandler: LogHandler {
        let recorder: Recorder
        var metadata: Logger.Metadata = ["node": "n1"]
        var logLevel: Logger.Level = .info
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let merged = event.metadata.map { metadata.merging($0) { $1 } } ?? metadata
            recorder.events.withLock { $0.append(("\(event.message)", merged)) }
        }
    }

    @Test func deferredMetadataReachesLoggedMessages() {
        let recorder = Recorder()
        var logger = Logger(label: "t") { _ in RecordingHandler(recorder: recorder) }.deferringMetadata()
        logger[metadataKey: "hb.request.id"] = "r1"
        #expect(logger[metadataKey: "hb.request.id"] == "r1")
        #expect(logger[metadataKey: "node"] == "n1")
        logger.debug("below the level")
        logger.info("hello", metadata: ["k": "v"])
        logger.info("plain")
        let events = recorder.events.withLock { $0 }
        #expect(events.count == 2)
        #expect(events.first?.0 == "hello")
        #expect(events.first?.1 == ["node": "n1", "hb.request.id": "r1", "k": "v"])
        #expect(events.last?.1 == ["node": "n1", "hb.request.id": "r1"])
        logger.handler.metadata = ["only": "this"]
        logger.info("replaced")
        #expect(recorder.events.withLock { $0.last?.1 } == ["only": "this"])
    }
}
