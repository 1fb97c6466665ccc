import ArgumentParser
import CEmberMallocConf
import EmberArchiveS3
import EmberCore
import EmberServer
import EmberStorage
import Foundation
import Logging

/// `emberd`: runs one Ember node in the foreground. Ready when `GET /.json` answers 200.
@main
struct Emberd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "emberd",
        abstract: "Run an Ember node (a Firebase Realtime Database compatible server).",
        version: BuildInfo.describe(program: "emberd"))

    @Option(help: "Data directory (created if missing).")
    var data = "./ember-data"

    @Option(help: "Client port (0: the system picks a free one; see --port-file).")
    var port = 9000

    @Option(help: "Write the client port the node listens on to this file once it serves (with --port 0, how a test or script learns it).")
    var portFile: String?

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "Firebase rules file: the rules of every namespace whose rules were not set with PUT /.settings/rules.json.")
    var rules: String?

    @Option(help: "Namespace used when a request has no ns parameter.")
    var namespace = "default"

    @Option(help: "Largest request body in bytes.")
    var maxBodyBytes = 32 * 1024 * 1024

    @Option(help: "Log entries kept after they are applied: in a cluster the tail followers can catch up from (default 10000); a single node needs none to restart (default 0).")
    var logRetain: Int?

    @Option(help: "Largest read in MiB of stored data (keys with full paths + values); larger reads get 400. Use shallow=true or queries below it.")
    var maxReadMb = 512

    @Option(help: "Threads reading stored data for clients: REST GET, the first event of SSE streams, wire listens and gets (default: the number of cores, at least 2).")
    var readThreads: Int?

    @Option(help: "Client reads that may wait for a read thread; past it REST reads get 503 and wire listens/gets status `unavailable`.")
    var maxQueuedReads = ReadPool.Limits().maxQueued

    @Option(help: "Seconds between SSE keep-alive events.")
    var keepAlive = 30.0

    @Option(help: "Events queued per SSE stream before a slow reader is disconnected.")
    var sseQueueLimit = 4096

    @Option(help: "Open SSE streams per node.")
    var maxSseStreams = 10_000

    @Option(help: "Messages queued per WebSocket connection before a slow client is disconnected.")
    var wsQueueLimit = 10_000

    @Option(help: "Bytes queued for one WebSocket connection's socket and not yet written before the client is cut off as a slow consumer.")
    var wsOutboundBytes = RealtimeSession.Limits().maxOutboundBytes

    @Option(help: "Seconds between the server's pings on a WebSocket connection; one left without a pong by the next ping closes the connection.")
    var wsPingInterval = RealtimeSession.Limits().pingIntervalSeconds

    @Option(help: "WebSocket connections per node.")
    var maxConnections = 100_000

    @Option(help: "WebSocket connections plus SSE streams per client address (0: no limit).")
    var maxConnectionsPerAddress = 1_000

    @Option(help: "Listens per WebSocket connection.")
    var maxListens = 10_000

    @Option(help: "Requests per second per connection, WebSocket or REST keep-alive (0: no limit).")
    var maxRequestsPerSecond = 1_000.0

    @Option(help: "Requests a connection may make at once after a quiet period.")
    var requestBurst = 2_000.0

    @Option(help: "REST requests plus WebSocket messages per second per client address, over all its connections (0: no limit).")
    var maxRequestsPerSecondPerAddress = 0.0

    @Option(help: "Requests an address may make at once after a quiet period (default: twice the per-address rate).")
    var requestBurstPerAddress: Double?

    @Option(help: "Most nodes one write may contain.")
    var maxWriteNodes = 2_000_000

    // Auth. Without any of the first five the node runs in protected mode (loopback only).
    @Option(help: "Auth: file of HS256 shared secrets, one a line (at least 32 bytes each).")
    var authHs256SecretFile: String?

    @Option(help: "Auth: JWKS file with the RS256/ES256 public keys tokens are signed with.")
    var authJwksFile: String?

    @Option(help: "Auth: required iss claim.")
    var authIssuer: String?

    @Option(help: "Auth: required aud claim.")
    var authAudience: String?

    @Option(help: "Auth: file of admin tokens, one a line (at least 16 bytes); admin from any address.")
    var adminTokenFile: String?

    @Option(help: "Auth: addresses (CIDR,...) from which `Bearer owner` (firebase-admin) is admin.")
    var trustOwnerFrom: String?

    @Flag(help: "Development: allow a non-loopback --host without auth (anyone who reaches the node is admin).")
    var dev = false

    @Option(help: "HTTPS/WSS for clients: PEM certificate (chain). Cluster peers use --peer-tls-cert.")
    var tlsCert: String?

    @Option(help: "HTTPS/WSS for clients: PEM private key of --tls-cert.")
    var tlsKey: String?

    @Option(help: "HTTPS/WSS for clients: CA (PEM) whose client certificates are accepted (optional for clients); CN/SAN `admin` is admin.")
    var tlsCa: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel = "info"

    // Cluster mode: any of these (or --cluster-config) turns it on; without them emberd is a
    // single node. Flags override the config file's fields.
    @Option(help: "Node config file (JSON: nodeId, peerAddress, peers, peerTlsCert, peerTlsKey, peerTlsCa, tlsCert, tlsKey, tlsCa, clientUrls).")
    var clusterConfig: String?

    @Option(help: "Cluster: this node's id (its peer certificate must name it as CN or SAN DNS).")
    var nodeId: String?

    @Option(help: "Cluster: address the peer listener binds to (default: this node's --peers entry, else 127.0.0.1).")
    var peerAddress: String?

    @Option(help: "Cluster: peer listener port (default: this node's --peers entry).")
    var peerPort: Int?

    @Option(help: "Cluster: members as id=host:port,... (this node may be included).")
    var peers: String?

    @Option(help: "Cluster: PEM certificate (chain) for the peer channel's mutual TLS.")
    var peerTlsCert: String?

    @Option(help: "Cluster: PEM private key of --peer-tls-cert.")
    var peerTlsKey: String?

    @Option(help: "Cluster: PEM certificate of the cluster CA; peers must present a certificate it signed.")
    var peerTlsCa: String?

    @Flag(help: "Cluster: start as a new member to be added at run time (POST /.ember/members); --peers lists the current members.")
    var join = false

    @Option(help: "Cluster: id=host:port,... where this node dials those members instead of their address in the member directory (local; e.g. NAT, or per-pair proxies in tests).")
    var peerDial: String?

    @Option(help: "Cluster: applied entries between Raft log compactions (snapshots).")
    var snapshotEntries: UInt64 = 10_000

    @Option(help: "Cluster: applied entries a compaction keeps in the log, so a follower briefly behind catches up without a snapshot (default: --snapshot-entries).")
    var snapshotCatchUpEntries: UInt64?

    @Option(help: "Cluster: MiB of applied entries a compaction keeps in Raft's in-memory log (a compaction is due at twice this), however few entries that is: bounds each member's memory under multi-MB writes such as a bulk import's chunks; a follower further behind catches up from a snapshot. 1...4096.")
    var snapshotCatchUpMb = ClusterConfiguration.defaultSnapshotCatchUpBytes >> 20

    @Option(help: "Cluster: a learner is promoted to voter (POST /.ember/members/ID/promote, `ember members promote`) only while at most this many entries behind the leader's log; further behind, promote answers 409 with its lag (a voter that far behind would hold commits back until it caught up). Counted on the leader; 0...100000000.")
    var maxPromotionLag: UInt64 = ClusterConfiguration.defaultMaxPromotionLag

    @Option(help: "Cluster: while this node is a learner its batches commit without a data sync, and one sync every this many milliseconds makes them durable (a learner counts for no quorum: a crash of its machine costs a resync from an empty data directory, docs/CLUSTER.md \"Learners\"). 0: every batch synced; 0...60000.")
    var learnerSyncIntervalMs = ClusterConfiguration.defaultLearnerSyncMillis

    @Option(help: "Cluster: while this node leads, fewer than --learner-batch-entries committed entries are held from a learner for at most this many milliseconds, so at a low write rate a learner wakes once per several commits (its listeners hear of a write up to that much later). Default \(ClusterConfiguration.defaultLearnerBatchMillis); 0 turns it off (each commit at once); 0...\(ClusterConfiguration.maxLearnerBatchMillis).")
    var learnerBatchMs = ClusterConfiguration.defaultLearnerBatchMillis

    @Option(help: "Cluster: while this node is a learner, every thread of emberd runs at this niceness, so on a machine shared with voters the learner takes the CPU they leave (docs/CLUSTER.md \"Learners\"). Promoted, it returns to its starting niceness, which needs CAP_SYS_NICE (otherwise it warns: restart it). 0: off; 0...19.")
    var learnerNice: Int32 = 0

    @Option(help: "Cluster: with --learner-batch-ms, this many committed entries pending for a learner go at once (default \(ClusterConfiguration.defaultLearnerBatchEntries)); 1...\(ClusterConfiguration.maxLearnerBatchEntries).")
    var learnerBatchEntries = ClusterConfiguration.defaultLearnerBatchEntries

    // Operations (issue 5): see README "Operations".
    @Option(help: "This node's client URL as clients and `ember status` reach it (default http://HOST:PORT).")
    var advertiseUrl: String?

    @Option(help: "Client URLs of the cluster members as id=url,...: sent to clients in the WebSocket handshake (failover) and used by `ember status` to find every node from one.")
    var clientUrls: String?

    @Option(help: "/readyz fails while applied trails the known commit index by more than this many entries.")
    var readyMaxLag: UInt64 = 1_000

    @Option(help: "A cluster member holds client reads (REST GETs, SSE streams, WebSocket listens and gets) from its start until it has caught up with the cluster: each at most this many seconds, then 503 (REST) or the connection is closed (WebSocket; the SDK reconnects).")
    var catchUpWait: Double = 30

    @Option(help: "At most this many client reads held at once while the member catches up; more are refused at once.")
    var catchUpMaxHeld: Int = 10_000

    @Option(help: "Defragment the data file online when free pages are at least FREE-RATIO of it and MIN-BYTES, after QUIET-WINDOW without writes: free-ratio,min-bytes,quiet-window, e.g. 0.3,64MiB,30s (default: off; `ember defrag` any time).")
    var autoDefrag: String?

    @Flag(help: "Check the flags, rules and cluster/TLS files, print the effective settings and exit (no data is opened).")
    var checkConfig = false

    @Flag(help: "Do not serve the web console (/.ember/console/); its paths answer 404.")
    var noConsole = false

    @Option(help: "Largest data file (the LMDB map), e.g. 64GiB or 512MiB. Writes get 507 (the NOSPACE alarm) when less than a reserve is left; raise it and restart, or compact/defrag (deploy/OPERATIONS.md).")
    var maxDbSize = "64GiB"

    @Option(help: "Cluster: seconds between corruption checks (members compare state hashes at one applied index; a member that disagrees with the majority raises CORRUPT and serves no data); 0: only `ember check hashes`.")
    var corruptionCheckInterval: Double = 300

    @Option(name: .customLong("ondisconnect-lease"), help: "Cluster: seconds the leader waits for a silent member before running the onDisconnect writes of its clients' sessions.")
    var onDisconnectLease: Double = 10

    // Point-in-time recovery (issue 37): see deploy/OPERATIONS.md "Point-in-time recovery".
    @Option(help: "Point-in-time archive: directory (local, or a volume every member mounts) or S3-compatible object store location (s3://bucket/prefix, see --archive-s3-*) the leader writes committed log entries and base snapshots to; `ember restore --archive` restores any instant of it (config file: archive).")
    var archive: String?

    @OptionGroup var archiveS3: ArchiveS3Flags

    @Option(help: "s3:// archive: bases larger than this are uploaded in parts of this size (S3 multipart upload; 5MiB to 5GiB).")
    var archiveS3PartSize = "8MiB"

    @Option(help: "Archive: how long back a restore can reach (e.g. 7d, 12h, 90m); older segments and bases are removed, keeping the newest base before the window.")
    var archiveRetention = "7d"

    @Option(help: "Archive: interval between base snapshots (e.g. 6h); one is also written when a node starts to archive.")
    var archiveBaseEvery = "6h"

    @Option(help: "Archive: a segment is closed (stored, fsynced) once it holds this many bytes of entries (e.g. 16MiB)…")
    var archiveSegmentBytes = "16MiB"

    @Option(help: "Archive: …or when its oldest entry is this old (e.g. 60s): what an archive can lag at most while writes come in.")
    var archiveSegmentAge = "60s"

    /// Smallest --max-db-size: LMDB's tables and a few commits must fit.
    static let minDbSize = 1 << 20
    /// Largest --max-db-size (1 PiB: past any disk; LMDB reserves the address space).
    static let maxDbSize = 1 << 50

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
        config.realtimeLimits.session.maxOutboundBytes = max(1024, wsOutboundBytes)
        config.realtimeLimits.session.pingIntervalSeconds = min(max(0.05, wsPingInterval), 3600)
        config.realtimeLimits.maxConnections = maxConnections
        config.realtimeLimits.session.maxListens = maxListens
        config.maxConnectionsPerAddress = max(0, maxConnectionsPerAddress)
        config.maxWriteNodes = maxWriteNodes
        var rate = RequestRateLimit()
        rate.perSecond = max(0, maxRequestsPerSecond)
        rate.burst = max(1, requestBurst)
        config.restRequestRate = rate
        config.realtimeLimits.session.requestRate = rate
        var perAddress = RequestRateLimit()
        perAddress.perSecond = max(0, maxRequestsPerSecondPerAddress)
        perAddress.burst = max(1, requestBurstPerAddress ?? 2 * perAddress.perSecond)
        config.addressRequestRate = perAddress
        let mode: AuthMode
        do { (mode, config.tokenVerifier) = try await authSetup() } catch {
            // One line, no usage text: the operator needs the reason, not the flag list.
            FileHandle.standardError.write(Data("emberd: \(error)\n".utf8))
            throw ExitCode(2)
        }
        guard (1...(1 << 20)).contains(maxReadMb) else { throw ValidationError("--max-read-mb must be 1...1048576") }
        if let readThreads {
            guard (1...ReadPool.Limits.maxThreads).contains(readThreads) else {
                throw ValidationError("--read-threads must be 1...\(ReadPool.Limits.maxThreads)")
            }
            config.readPool.threads = readThreads
        }
        guard (0...ReadPool.Limits.maxQueueBound).contains(maxQueuedReads) else {
            throw ValidationError("--max-queued-reads must be 0...\(ReadPool.Limits.maxQueueBound)")
        }
        config.readPool.maxQueued = maxQueuedReads
        let configFile = try clusterConfig.map { try ClusterConfigFile.load(path: $0) }
        config.clientTLS = try clientTLS(file: configFile)
        if let rules {
            let text: String
            do { text = try String(contentsOfFile: rules, encoding: .utf8) } catch {
                throw ValidationError("cannot read rules file \(rules): \(error.localizedDescription)")
            }
            do { config.rules = try RulesDocument(text: text) } catch {
                throw ValidationError("rules file \(rules): \(error.message)")
            }
        }
        config.operations.advertisedURL = advertiseUrl
        config.operations.memberURLs = try clientUrls != nil ? OperationsFlags.parseClientURLs(clientUrls)
            : OperationsFlags.checkClientURLs(configFile?.clientUrls ?? [:])
        config.operations.readyMaxLagEntries = readyMaxLag
        guard catchUpWait >= 0 && catchUpWait <= 3600 else { throw ValidationError("--catch-up-wait must be 0...3600 seconds") }
        guard catchUpMaxHeld >= 0 && catchUpMaxHeld <= 1_000_000 else { throw ValidationError("--catch-up-max-held must be 0...1000000") }
        config.operations.catchUp = CatchUpGate.Limits(maxHeld: catchUpMaxHeld, maxWaitMillis: Int64(catchUpWait * 1000))
        config.operations.console = !noConsole
        config.operations.autoDefrag = try autoDefrag.map(AutoDefragPolicy.parse)
        guard (1...3600).contains(onDisconnectLease) else { throw ValidationError("--ondisconnect-lease must be 1...3600 seconds") }
        config.onDisconnect.leaseSeconds = onDisconnectLease
        guard let mapSize = AutoDefragPolicy.bytes(maxDbSize), mapSize >= Self.minDbSize, mapSize <= Self.maxDbSize else {
            throw ValidationError("--max-db-size must be a size from 1MiB to 1PiB, such as 512MiB or 64GiB")
        }
        guard corruptionCheckInterval == 0 || (1...86_400).contains(corruptionCheckInterval) else {
            throw ValidationError("--corruption-check-interval must be 0 (off) or 1...86400 seconds")
        }
        guard maxPromotionLag <= ClusterConfiguration.maxPromotionLagLimit else {
            throw ValidationError("--max-promotion-lag must be 0...\(ClusterConfiguration.maxPromotionLagLimit) entries")
        }
        guard (0...ClusterConfiguration.maxLearnerSyncMillis).contains(learnerSyncIntervalMs) else {
            throw ValidationError("--learner-sync-interval-ms must be 0...\(ClusterConfiguration.maxLearnerSyncMillis)")
        }
        guard (0...ClusterConfiguration.maxLearnerBatchMillis).contains(learnerBatchMs) else {
            throw ValidationError("--learner-batch-ms must be 0...\(ClusterConfiguration.maxLearnerBatchMillis)")
        }
        guard (0...19).contains(learnerNice) else { throw ValidationError("--learner-nice must be 0...19") }
        guard (1...ClusterConfiguration.maxLearnerBatchEntries).contains(learnerBatchEntries) else {
            throw ValidationError("--learner-batch-entries must be 1...\(ClusterConfiguration.maxLearnerBatchEntries)")
        }
        guard (1...4096).contains(snapshotCatchUpMb) else { throw ValidationError("--snapshot-catch-up-mb must be 1...4096 MiB") }
        let archiveOptions = try archiveConfiguration(file: configFile)
        let clusterSettings = try clusterConfiguration(file: configFile)
        if checkConfig {
            print(try OperationsFlags.check(config: config, cluster: clusterSettings))
            return
        }
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        let store: NodePorts
        if var cluster = clusterSettings {
            var options = StoreOptions()
            options.logRetention = UInt64(max(0, logRetain ?? 10_000))
            options.maxReadBytes = maxReadMb << 20
            options.mapSize = mapSize
            cluster.corruptionCheckSeconds = corruptionCheckInterval
            store = try await ReplicatedDataStore.open(directory: data, options: options, cluster: cluster, archive: archiveOptions,
                                                       logger: logger).ports
        } else {
            store = try StoreFactory.open(directory: data, logRetain: logRetain ?? Int(StoreOptions.singleNodeLogRetention), maxReadBytes: maxReadMb << 20,
                                          mapSize: mapSize, archive: archiveOptions, logger: logger)
        }
        let node = try EmberNode(config: config, ports: store, logger: logger)
        logger.info("emberd starting", metadata: ["version": "\(BuildInfo.version)", "data": "\(data)", "address": "\(host):\(port)", "namespace": "\(namespace)",
                                                  "tls": "\(config.clientTLS != nil)", "allocator": "\(Allocator.name)",
                                                  "allocatorArenas": "\(Allocator.arenas.map(String.init) ?? "-")", "allocatorBuiltIn": "\(String(cString: ember_malloc_conf()))"])
        logger.info("auth: \(mode.summary)")
        if let jwt = config.tokenVerifier as? JWTTokenVerifier { logger.info("auth: \(jwt.summary)") }
        if let files = FileLimit.raiseToHard() {
            logger.info("open-file limit", metadata: ["before": "\(files.before)", "now": "\(files.after)", "hard": "\(files.hard)",
                                                      "error": "\(files.error ?? "none")"])
        }
        let readyLogger = logger
        let portFile = portFile
        try await node.run { port in
            readyLogger.info("emberd ready", metadata: ["port": "\(port)"])
            if let portFile {
                // Written whole (atomically) so a reader never sees a partial number.
                do { try "\(port)\n".write(toFile: portFile, atomically: true, encoding: .utf8) } catch {
                    readyLogger.error("cannot write --port-file", metadata: ["path": "\(portFile)", "error": "\(error)"])
                }
            }
        }
        logger.info("emberd stopped")
    }
}

extension Emberd {
    /// The archive's settings from --archive* (or the config file's `archive`); nil: no archive.
    func archiveConfiguration(file: ClusterConfigFile?) throws -> ArchiveOptions? {
        guard let dir = archive ?? file?.archive else { return nil }
        var o = ArchiveOptions(directory: dir)
        if dir.contains("://") {
            guard dir.hasPrefix(S3Location.scheme) else { throw ValidationError("--archive takes a directory or s3://bucket/prefix, not \(dir)") }
            guard let part = AutoDefragPolicy.bytes(archiveS3PartSize) else {
                throw ValidationError("--archive-s3-part-size must be a size from 5MiB to 5GiB, such as 8MiB")
            }
            do { o.store = try archiveS3.open(dir, create: true, partBytes: part) } catch {
                throw ValidationError("--archive \(dir): \(error)")
            }
        }
        func duration(_ text: String, _ flag: String, _ range: ClosedRange<Double>) throws -> Double {
            let units: [(String, Double)] = [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)]
            var seconds = Double(text)
            for (u, scale) in units where seconds == nil && text.hasSuffix(u) { seconds = Double(text.dropLast()).map { $0 * scale } }
            guard let seconds, range.contains(seconds) else {
                throw ValidationError("\(flag) must be a duration of \(Int(range.lowerBound))...\(Int(range.upperBound)) seconds, such as 30s, 90m, 6h or 7d")
            }
            return seconds
        }
        o.retentionSeconds = try duration(archiveRetention, "--archive-retention", 1...(3_650 * 86_400))
        o.baseEverySeconds = try duration(archiveBaseEvery, "--archive-base-every", 1...(365 * 86_400))
        o.segmentMaxAgeSeconds = try duration(archiveSegmentAge, "--archive-segment-age", 0.05...86_400)
        guard let bytes = AutoDefragPolicy.bytes(archiveSegmentBytes), (1...(1 << 30)).contains(bytes) else {
            throw ValidationError("--archive-segment-bytes must be a size from 1B to 1GiB, such as 16MiB")
        }
        o.segmentMaxBytes = bytes
        return o
    }

    /// Client HTTPS/WSS from --tls-cert/--tls-key/--tls-ca (or the config file's tlsCert,
    /// tlsKey, tlsCa; flags win); nil serves plain HTTP/WS.
    func clientTLS(file: ClusterConfigFile?) throws -> ClientTLS? {
        let cert = tlsCert ?? file?.tlsCert, key = tlsKey ?? file?.tlsKey, ca = tlsCa ?? file?.tlsCa
        switch (cert, key) {
        case (let cert?, let key?): return ClientTLS(certificatePath: cert, keyPath: key, clientCAPath: ca)
        case (nil, nil):
            if ca != nil { throw ValidationError("--tls-ca (config file: tlsCa) needs --tls-cert and --tls-key") }
            return nil
        case (_?, nil): throw ValidationError("--tls-cert needs --tls-key (config file: tlsCert needs tlsKey)")
        case (nil, _?): throw ValidationError("--tls-key needs --tls-cert (config file: tlsKey needs tlsCert)")
        }
    }

    /// The cluster settings from --cluster-config and the cluster flags; nil = single node.
    func clusterConfiguration(file: ClusterConfigFile?) throws -> ClusterConfiguration? {
        let anyFlag = [nodeId, peerAddress, peers, peerTlsCert, peerTlsKey, peerTlsCa].contains { $0 != nil } || peerPort != nil
        guard file != nil || anyFlag else { return nil }
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
        let peerTLS = (peerTlsCert ?? file?.peerTlsCert, peerTlsKey ?? file?.peerTlsKey, peerTlsCa ?? file?.peerTlsCa)
        guard let cert = peerTLS.0, let key = peerTLS.1, let ca = peerTLS.2 else {
            var missing: [String] = []
            if peerTLS.0 == nil { missing.append("--peer-tls-cert") }
            if peerTLS.1 == nil { missing.append("--peer-tls-key") }
            if peerTLS.2 == nil { missing.append("--peer-tls-ca") }
            // --tls-* used to name the peer certificate; say where it went.
            let hint = peerTLS.0 == nil && peerTLS.1 == nil && tlsCert != nil
                ? " (--tls-cert/--tls-key are the client HTTPS certificate; the peer channel's are --peer-tls-*)" : ""
            throw ValidationError("cluster mode needs --peer-tls-cert, --peer-tls-key and --peer-tls-ca (config file: "
                                  + "peerTlsCert, peerTlsKey, peerTlsCa); missing \(missing.joined(separator: ", "))\(hint)")
        }
        // Our own entry is where others reach us; keep it in the member list.
        if members[id] == nil { members[id] = listen }
        var config = ClusterConfiguration(nodeID: id, peerListen: listen, peers: members,
                                          tlsCertificatePath: cert, tlsKeyPath: key, tlsCAPath: ca)
        guard snapshotEntries > 0 else { throw ValidationError("--snapshot-entries must be positive") }
        config.snapshotEveryEntries = snapshotEntries
        config.snapshotCatchUpEntries = snapshotCatchUpEntries ?? snapshotEntries
        config.snapshotCatchUpBytes = snapshotCatchUpMb << 20
        config.join = join
        config.maxPromotionLag = maxPromotionLag
        config.learnerSyncMillis = learnerSyncIntervalMs
        config.learnerBatchMillis = learnerBatchMs
        config.learnerBatchEntries = learnerBatchEntries
        config.learnerNice = learnerNice
        if let peerDial { config.dialOverrides = try ClusterConfiguration.parsePeers(peerDial) }
        return config
    }
}


extension Emberd {
    /// The auth mode and verifier for the flags, or the reason the node must not start.
    func authSetup() async throws -> (AuthMode, any TokenVerifier) {
        var settings = JWTTokenVerifier.Settings()
        if let file = authHs256SecretFile { settings.hmacSecrets = try Self.lines(of: file, what: "HS256 secret") }
        if let file = authJwksFile { settings.jwksJSON = try Self.read(file, what: "JWKS") }
        if let file = adminTokenFile { settings.adminTokens = try Self.lines(of: file, what: "admin token") }
        if let trustOwnerFrom {
            switch CIDR.parseList(trustOwnerFrom) {
            case .success(let list): settings.trustOwnerFrom = list
            case .failure(let e): throw AuthSetupError("--trust-owner-from: \(e.entry) is not an address or CIDR")
            }
        }
        settings.issuer = authIssuer
        settings.audience = authAudience
        let configured = settings.hasKeys || !settings.adminTokens.isEmpty || !settings.trustOwnerFrom.isEmpty
        if !configured, authIssuer != nil || authAudience != nil {
            throw AuthSetupError("--auth-issuer/--auth-audience need --auth-hs256-secret-file or --auth-jwks-file")
        }
        let mode = try AuthMode.choose(host: host, authConfigured: configured, dev: dev).get()
        switch mode {
        case .verified: return (mode, try await JWTTokenVerifier.make(settings))
        case .protected, .development: return (mode, EmulatorTokenVerifier())
        }
    }

    static func read(_ path: String, what: String) throws -> String {
        do { return try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw AuthSetupError("cannot read \(what) file \(path)")
        }
    }

    /// Non-empty lines, trimmed; a file with none is an error.
    static func lines(of path: String, what: String) throws -> [String] {
        let lines = try read(path, what: what).split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !lines.isEmpty else { throw AuthSetupError("\(what) file \(path) is empty") }
        return lines
    }
}
