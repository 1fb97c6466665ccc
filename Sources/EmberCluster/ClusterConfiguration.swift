import EmberNodeStore
import EmberRaft
import Foundation

/// Settings of one cluster member. Every limit and timing is named here, with its default.
public struct ClusterConfiguration: Sendable {
    /// This node's id; its peer certificate must carry it as CN or SAN DNS name.
    public var nodeID: NodeID
    /// Address the peer listener binds to.
    public var peerListen: PeerAddress
    /// The initial members (this node is added). Once the cluster has changed membership at run
    /// time (`POST /.ember/members`), the replicated member directory takes precedence.
    public var peers: [NodeID: PeerAddress]
    /// Where this node dials some members instead of their directory address (`--peer-dial`):
    /// local, never replicated. For a network where members reach each other by different
    /// addresses (NAT, per-pair proxies in the fault campaign).
    public var dialOverrides: [NodeID: PeerAddress] = [:]
    /// Start as a node to be added at run time: no initial voters, it waits for a leader to
    /// replicate to it (only matters while its data directory is empty). `peers` then lists the
    /// current members, whose certificates it accepts until it learns the membership.
    public var join = false
    /// The peer channel's mutual TLS files (`--peer-tls-cert/--peer-tls-key/--peer-tls-ca`).
    public var tlsCertificatePath: String
    public var tlsKeyPath: String
    public var tlsCAPath: String

    /// Raft logical clock period. Elections time out after `electionTicks`..2x ticks.
    public var tickMillis = 50
    public var electionTicks = 10
    public var heartbeatTicks = 2
    /// How long a write (or linearizable read) waits for a leader to exist before failing with
    /// a retryable 503. Several election timeouts, so one failover fits inside it.
    public var noLeaderTimeoutSeconds = 5.0
    /// Longest a write waits to be applied once handed to a leader; after that its outcome is
    /// unknown to this node and the client gets a 503 saying so.
    public var writeTimeoutSeconds = 10.0
    /// A forwarded write whose leader has not answered by then is reported as unknown.
    public var forwardReplyTimeoutSeconds = 3.0
    /// Writes accepted by this node and not yet answered.
    public var maxPendingWrites = 16_384
    /// Bytes of those writes' log entries (issue 42: the count alone let a few clients with
    /// multi-MB writes, a bulk import among them, hold GBs on a leader). Past it a write is
    /// refused with a retryable 503 (`ember import` retries); one write alone is always
    /// admitted, however large (the front's body limit bounds it).
    public var maxPendingWriteBytes = Self.defaultMaxPendingWriteBytes
    public static let defaultMaxPendingWriteBytes = 256 << 20
    /// Linearizable reads waiting for their read index.
    public var maxPendingReads = 16_384
    /// Events (peer frames, ticks, proposals) queued for the Raft driver; peer frames beyond it
    /// are dropped (Raft tolerates loss), client requests fail with 503.
    public var maxQueuedEvents = 65_536
    /// Frames queued per peer while its connection is down or slow; the oldest are dropped.
    public var maxQueuedFramesPerPeer = 1_024
    /// Reconnect backoff bounds for the peer channel.
    public var reconnectMinMillis = 50
    public var reconnectMaxMillis = 2_000
    /// Applied entries between Raft log compactions (each serializes the state in memory).
    public var snapshotEveryEntries: UInt64 = 10_000
    /// Applied entries a compaction leaves in the log behind the applied index, so a follower a
    /// moment behind (a busy core, a slow fsync) catches up from entries instead of receiving the
    /// whole state as a snapshot (etcd keeps 5,000 for the same reason). Compacting right at the
    /// applied index sent a snapshot to a follower a few hundred entries behind under load.
    public var snapshotCatchUpEntries: UInt64 = 10_000
    /// Bytes of applied entries a compaction leaves in Raft's log (`RaftLog.byteCount`), however
    /// few entries that is; a compaction is due once the log holds twice this. Raft holds its
    /// log in memory, and a count alone let a bulk import's multi-MB entries pile up on every
    /// member (issue 42: 68 entries of ~4 MB for a 256 MB import, and up to 20,000 could stay).
    /// A follower further behind than this catches up from a snapshot.
    public var snapshotCatchUpBytes = Self.defaultSnapshotCatchUpBytes
    public static let defaultSnapshotCatchUpBytes = 32 << 20
    /// Longest an admin membership change waits to commit, and a leadership transfer to finish.
    public var adminTimeoutSeconds = 10.0
    public var transferTimeoutSeconds = 3.0
    /// Recent apply results kept so a forwarded write's answer can be matched even when its
    /// index was applied before the leader's reply arrived.
    public var recentResults = 4_096
    /// How close a learner must be to the leader's log (entries) before `promote` is accepted
    /// (emberd's `--max-promotion-lag`): a voter further behind would hold commits back until it
    /// caught up. Refusals say how far behind it is (409).
    public var maxPromotionLag: UInt64 = ClusterConfiguration.defaultMaxPromotionLag
    public static let defaultMaxPromotionLag = RaftConfig.defaultMaxPromotionLag
    /// Largest `maxPromotionLag` accepted: past it "caught up" means nothing.
    public static let maxPromotionLagLimit: UInt64 = 100_000_000
    /// While this node is a learner, its batches commit without a data sync and one sync every
    /// this many milliseconds makes them durable (emberd's `--learner-sync-interval-ms`;
    /// `EmberStorage.LazySync`): a learner's copy counts for no quorum, and its syncs competed
    /// with the voters' for the disk. 0: every batch synced, as a voter's.
    public var learnerSyncMillis = ClusterConfiguration.defaultLearnerSyncMillis
    public static let defaultLearnerSyncMillis = 1_000
    /// Longest `learnerSyncMillis` accepted.
    public static let maxLearnerSyncMillis = 60_000
    /// While leader: committed entries fewer than `learnerBatchEntries` are held from a learner
    /// for at most this many milliseconds (emberd's `--learner-batch-ms`; `RaftConfig
    /// .learnerBatchMinEntries`), so at a low write rate a learner wakes once per several commits
    /// instead of once each. What its listeners wait at most on top; 0: each commit at once.
    /// On by default since session 21 (issue 38): with 2 learners it took the pipelined write
    /// throughput from 80.6 % to 83.2 % of none and the commit p50 from +11.8 % to +6.1 %, for a
    /// learner's listener p99 of 5.5 ms at 1,000 writes/s.
    public var learnerBatchMillis = ClusterConfiguration.defaultLearnerBatchMillis
    public static let defaultLearnerBatchMillis = 4
    /// Longest `learnerBatchMillis` accepted: below the tick, which sends held entries anyway.
    public static let maxLearnerBatchMillis = 40
    /// Pending committed entries that go to a learner at once while `learnerBatchMillis` > 0
    /// (emberd's `--learner-batch-entries`): fewer wait for more commits or the timer.
    public var learnerBatchEntries = ClusterConfiguration.defaultLearnerBatchEntries
    public static let defaultLearnerBatchEntries = 3
    /// Largest `learnerBatchEntries` accepted: a learner answers that many at once
    /// (`RaftConfig.defaultLearnerAckMinEntries`).
    public static let maxLearnerBatchEntries = RaftConfig.defaultLearnerAckMinEntries
    /// Niceness of the process while this node is a learner (emberd's `--learner-nice`,
    /// `LearnerPriority`); 0: off.
    public var learnerNice: Int32 = 0

    /// Seconds between corruption-check rounds (`CorruptionCheck`; emberd's
    /// `--corruption-check-interval`); 0: only on demand.
    public var corruptionCheckSeconds = 300.0

    public init(nodeID: NodeID, peerListen: PeerAddress, peers: [NodeID: PeerAddress],
                tlsCertificatePath: String, tlsKeyPath: String, tlsCAPath: String) {
        self.nodeID = nodeID
        self.peerListen = peerListen
        self.peers = peers
        self.tlsCertificatePath = tlsCertificatePath
        self.tlsKeyPath = tlsKeyPath
        self.tlsCAPath = tlsCAPath
    }

    /// All voters, sorted (this node included).
    public var voters: [NodeID] { Array(Set(peers.keys).union([nodeID])).sorted() }

    /// The other members and their addresses.
    public var remotePeers: [NodeID: PeerAddress] { peers.filter { $0.key != nodeID } }

    /// Parses `n1=host:port,n2=host:port`.
    public static func parsePeers(_ text: String) throws -> [NodeID: PeerAddress] {
        var out: [NodeID: PeerAddress] = [:]
        for item in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !item.isEmpty {
            let parts = item.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, isValidNodeID(parts[0]), let addr = PeerAddress(parts[1]) else {
                throw ClusterConfigError("invalid peer '\(item)': expected id=host:port")
            }
            guard out[parts[0]] == nil else { throw ClusterConfigError("peer \(parts[0]) is listed twice") }
            out[parts[0]] = addr
        }
        return out
    }

    /// Node ids double as certificate DNS names: letters, digits, '-', '.', at most 63 bytes.
    public static func isValidNodeID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 63
            && id.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) && $0.isASCII || $0 == "-" || $0 == "." }
    }

    /// Checks what the flags/config file cannot express by type.
    public func validate() throws {
        guard Self.isValidNodeID(nodeID) else { throw ClusterConfigError("invalid node id '\(nodeID)'") }
        for path in [tlsCertificatePath, tlsKeyPath, tlsCAPath] where !FileManager.default.isReadableFile(atPath: path) {
            throw ClusterConfigError("cannot read TLS file \(path)")
        }
        precondition(electionTicks > heartbeatTicks && heartbeatTicks > 0 && tickMillis > 0, "bad Raft timing")
    }
}

public struct ClusterConfigError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ d: String) { description = d }
}

/// The cluster config file (JSON); command-line flags override its fields. Example:
/// `{"nodeId":"n1","peerAddress":"127.0.0.1:7001","peers":{"n1":"127.0.0.1:7001","n2":"127.0.0.1:7002"},
///   "peerTlsCert":"n1.pem","peerTlsKey":"n1.key","peerTlsCa":"ca.pem"}`, plus optionally
/// `"tlsCert"`/`"tlsKey"`/`"tlsCa"` for client HTTPS/WSS (the flags' names without dashes, as in
/// etcd: `tls*` faces clients, `peerTls*` the peers) and `"clientUrls"`. Relative paths are
/// resolved against the file's directory.
public struct ClusterConfigFile: Codable, Sendable {
    public var nodeId: String?
    public var peerAddress: String?
    public var peers: [String: String]?
    /// The peer channel's mutual TLS (`--peer-tls-cert/--peer-tls-key/--peer-tls-ca`).
    public var peerTlsCert: String?
    public var peerTlsKey: String?
    public var peerTlsCa: String?
    /// Client HTTPS/WSS (`--tls-cert/--tls-key/--tls-ca`).
    public var tlsCert: String?
    public var tlsKey: String?
    public var tlsCa: String?
    /// Client URLs of the members (`--client-urls`): `{"n1": "http://10.0.0.1:9000", ...}`.
    public var clientUrls: [String: String]?
    /// The point-in-time archive's directory (`--archive`).
    public var archive: String?

    public static func load(path: String) throws -> ClusterConfigFile {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw ClusterConfigError("cannot read cluster config \(path): \(error.localizedDescription)")
        }
        var file: ClusterConfigFile
        do { file = try JSONDecoder().decode(ClusterConfigFile.self, from: data) } catch {
            throw ClusterConfigError("cluster config \(path): \(error)")
        }
        let dir = URL(fileURLWithPath: path).deletingLastPathComponent()
        func resolve(_ p: String?) -> String? {
            guard let p, !p.hasPrefix("/") else { return p }
            return dir.appendingPathComponent(p).path
        }
        file.peerTlsCert = resolve(file.peerTlsCert)
        file.peerTlsKey = resolve(file.peerTlsKey)
        file.peerTlsCa = resolve(file.peerTlsCa)
        file.tlsCert = resolve(file.tlsCert)
        file.tlsKey = resolve(file.tlsKey)
        file.tlsCa = resolve(file.tlsCa)
        // An object store's location (s3://bucket/prefix) is not a path.
        if file.archive?.contains("://") != true { file.archive = resolve(file.archive) }
        return file
    }
}

extension ClusterConfiguration {
    /// Where to compact Raft's log now, if it is due: every `snapshotEveryEntries` applied
    /// entries, leaving the last `snapshotCatchUpEntries` applied ones in the log.
    func compactionIndex(applied: UInt64, snapshotIndex: UInt64) -> UInt64? {
        let keep = snapshotCatchUpEntries
        guard applied >= snapshotIndex + snapshotEveryEntries + keep else { return nil }
        return applied - keep
    }

    /// `compactionIndex(applied:snapshotIndex:)`, or, once `log` holds more than twice
    /// `snapshotCatchUpBytes`, the index that leaves at most `snapshotCatchUpBytes` of applied
    /// entries behind the applied index (and no more than `snapshotCatchUpEntries` of them).
    func compactionIndex(applied: UInt64, log: RaftLog) -> UInt64? {
        if let index = compactionIndex(applied: applied, snapshotIndex: log.snapshotIndex) { return index }
        guard log.byteCount > 2 * snapshotCatchUpBytes, applied > log.snapshotIndex else { return nil }
        var index = applied, kept = 0, count: UInt64 = 0
        while index > log.snapshotIndex, count < snapshotCatchUpEntries, let e = log.entry(at: index),
              kept + e.approximateSize <= snapshotCatchUpBytes {
            kept += e.approximateSize
            count += 1
            index -= 1
        }
        return index > log.snapshotIndex ? index : nil
    }
}
