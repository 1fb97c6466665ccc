import Logging
import Synchronization
import Testing

@testable import EmberCluster
@testable import EmberNodeStore
@testable import EmberServer

/// The HTTP server's log handler: metadata set per request reaches logged messages only.
@Suite struct DeferredMetadataLogHandlerTests {
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
