import ArgumentParser
import EmberServer
import EmberStorage
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

    @Option(help: "Firebase rules file: the rules of every namespace whose rules were not set with PUT /.settings/rules.json.")
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

    // Cluster mode: any of these (or --cluster-config) turns it on; without them emberd is a
    // single node. Flags override the config file's fields.
    @Option(help: "Cluster config file (JSON: nodeId, peerAddress, peers, tlsCert, tlsKey, tlsCa).")
    var clusterConfig: String?

    @Option(help: "Cluster: this node's id (its peer certificate must name it as CN or SAN DNS).")
    var nodeId: String?

    @Option(help: "Cluster: address the peer listener binds to (default: this node's --peers entry, else 127.0.0.1).")
    var peerAddress: String?

    @Option(help: "Cluster: peer listener port (default: this node's --peers entry).")
    var peerPort: Int?

    @Option(help: "Cluster: members as id=host:port,... (this node may be included).")
    var peers: String?

    @Option(help: "Cluster: PEM certificate (chain) for the peer channel.")
    var tlsCert: String?

    @Option(help: "Cluster: PEM private key of --tls-cert.")
    var tlsKey: String?

    @Option(help: "Cluster: PEM certificate of the cluster CA; peers must present a certificate it signed.")
    var tlsCa: String?

    @Option(help: "Cluster: applied entries between Raft log compactions (snapshots).")
    var snapshotEntries: UInt64 = 10_000

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
        let store: any DataStore
        if let cluster = try clusterConfiguration() {
            var options = StoreOptions()
            options.logRetention = UInt64(max(0, logRetain))
            store = try await ReplicatedDataStore.open(directory: data, options: options, cluster: cluster, logger: logger)
        } else {
            store = try StoreFactory.open(directory: data, logRetain: logRetain, logger: logger)
        }
        let node = try EmberNode(config: config, store: store, logger: logger)
        logger.info("emberd starting", metadata: ["data": "\(data)", "address": "\(host):\(port)", "namespace": "\(namespace)"])
        let readyLogger = logger
        try await node.run { port in
            readyLogger.info("emberd ready", metadata: ["port": "\(port)"])
        }
        logger.info("emberd stopped")
    }
}

extension Emberd {
    /// The cluster settings from --cluster-config and the cluster flags; nil = single node.
    func clusterConfiguration() throws -> ClusterConfiguration? {
        let anyFlag = [nodeId, peerAddress, peers, tlsCert, tlsKey, tlsCa].contains { $0 != nil } || peerPort != nil
        guard clusterConfig != nil || anyFlag else { return nil }
        let file = try clusterConfig.map { try ClusterConfigFile.load(path: $0) }
        guard let id = nodeId ?? file?.nodeId else { throw ValidationError("cluster mode needs --node-id") }
        var members: [String: PeerAddress] = [:]
        if let peers {
            members = try ClusterConfiguration.parsePeers(peers)
        } else if let filePeers = file?.peers {
            for (k, v) in filePeers {
                guard let a = PeerAddress(v) else { throw ValidationError("cluster config: bad address \(v) for \(k)") }
                members[k] = a
            }
        }
        guard !members.isEmpty else { throw ValidationError("cluster mode needs --peers") }
        var listen = PeerAddress(host: "127.0.0.1", port: 0)
        if let own = members[id] {
            listen = own
        } else if let a = file?.peerAddress {
            guard let p = PeerAddress(a) else { throw ValidationError("cluster config: bad peerAddress \(a)") }
            listen = p
        }
        if let peerAddress {
            if let full = PeerAddress(peerAddress) { listen = full } else { listen.host = peerAddress }
        }
        if let peerPort { listen.port = peerPort }
        guard listen.port > 0 else { throw ValidationError("cluster mode needs --peer-port (or this node in --peers)") }
        guard let cert = tlsCert ?? file?.tlsCert, let key = tlsKey ?? file?.tlsKey, let ca = tlsCa ?? file?.tlsCa else {
            throw ValidationError("cluster mode needs --tls-cert, --tls-key and --tls-ca")
        }
        // Our own entry is where others reach us; keep it in the member list.
        if members[id] == nil { members[id] = listen }
        var config = ClusterConfiguration(nodeID: id, peerListen: listen, peers: members,
                                          tlsCertificatePath: cert, tlsKeyPath: key, tlsCAPath: ca)
        guard snapshotEntries > 0 else { throw ValidationError("--snapshot-entries must be positive") }
        config.snapshotEveryEntries = snapshotEntries
        return config
    }
}
