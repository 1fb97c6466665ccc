import ArgumentParser
import EmberServer
import Foundation
import Logging

/// `emberd`: runs one Ember node in the foreground. Ready when `GET /.json` answers 200.
@main
struct Emberd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "emberd",
        abstract: "Run an Ember node (a Firebase Realtime Database compatible server).")

    @Option(help: "Data directory (created if missing).")
    var data = "./ember-data"

    @Option(help: "Client port.")
    var port = 9000

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "Firebase rules JSON file; applies to every namespace.")
    var rules: String?

    @Option(help: "Namespace used when a request has no ns parameter.")
    var namespace = "default"

    @Option(help: "Largest request body in bytes.")
    var maxBodyBytes = 32 * 1024 * 1024

    @Option(help: "Log entries kept after compaction (the tail followers can catch up from).")
    var logRetain = 10_000

    @Option(help: "Seconds between SSE keep-alive events.")
    var keepAlive = 30.0

    @Option(help: "Events queued per SSE stream before a slow reader is disconnected.")
    var sseQueueLimit = 4096

    @Option(help: "Open SSE streams per node.")
    var maxSseStreams = 10_000

    @Option(help: "Messages queued per WebSocket connection before a slow client is disconnected.")
    var wsQueueLimit = 10_000

    @Option(help: "WebSocket connections per node.")
    var maxConnections = 100_000

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel = "info"

    func run() async throws {
        LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
        var logger = Logger(label: "emberd")
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        var config = NodeConfiguration()
        config.host = host
        config.port = port
        config.dataDirectory = data
        config.defaultNamespace = namespace
        config.maxRequestBytes = maxBodyBytes
        config.keepAliveSeconds = keepAlive
        config.streamLimits.queueLimit = sseQueueLimit
        config.streamLimits.maxStreams = maxSseStreams
        config.realtimeLimits.session.outboundQueue = wsQueueLimit
        config.realtimeLimits.maxConnections = maxConnections
        if let rules {
            let text: String
            do { text = try String(contentsOfFile: rules, encoding: .utf8) } catch {
                throw ValidationError("cannot read rules file \(rules): \(error.localizedDescription)")
            }
            do { config.rules = try RulesDocument(text: text) } catch {
                throw ValidationError("rules file \(rules): \(error.message)")
            }
        }
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        let store = try StoreFactory.open(directory: data, logRetain: logRetain, logger: logger)
        let node = try EmberNode(config: config, store: store, logger: logger)
        logger.info("emberd starting", metadata: ["data": "\(data)", "address": "\(host):\(port)", "namespace": "\(namespace)"])
        let readyLogger = logger
        try await node.run { port in
            readyLogger.info("emberd ready", metadata: ["port": "\(port)"])
        }
        logger.info("emberd stopped")
    }
}
