import EmberStorage
import Foundation
import Logging
import EmberTestSupport

@testable import EmberCluster
@testable import EmberNodeStore

/// Members over real mutual TLS in this process, each opened with the peer protocols it offers
/// (a member of an older release offers fewer levels: `PeerTLS.protocolLevel3`, ...). For the
/// tests of what a mixed-release cluster logs and sends.
final class LevelledTLSCluster {
    let dir: String
    let ids: [String]
    let peers: [String: PeerAddress]
    var nodes: [ReplicatedDataStore] = []
    private let logger: Logger
    private let options: StoreOptions

    init(_ name: String, ids: [String]) async throws {
        dir = TestDirectory.root + "ember-\(name)-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        self.ids = ids
        let dir = self.dir
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
            Thread.detachNewThread { c.resume(with: Result { try ReplicatedDataStoreTests.makeCerts(dir, ids: ids) }) }
        }
        peers = Dictionary(uniqueKeysWithValues: zip(ids, try FreePorts.pick(ids.count)).map { ($0, PeerAddress(host: "127.0.0.1", port: $1)) })
        var logger = Logger(label: name)
        logger.logLevel = .error
        self.logger = logger
        var options = StoreOptions()
        options.mapSize = 1 << 28
        self.options = options
    }

    /// Opens (or reopens) member `id` on its directory, offering `protocols`.
    func open(_ id: String, _ protocols: [String]) async throws -> ReplicatedDataStore {
        var c = ClusterConfiguration(nodeID: id, peerListen: peers[id]!, peers: peers, tlsCertificatePath: "\(dir)/\(id).pem",
                                     tlsKeyPath: "\(dir)/\(id).key", tlsCAPath: "\(dir)/ca.pem")
        c.noLeaderTimeoutSeconds = 60
        c.writeTimeoutSeconds = 60
        c.forwardReplyTimeoutSeconds = 60
        return try await ReplicatedDataStore.open(directory: "\(dir)/\(id)", options: options, cluster: c, logger: logger,
                                                  peerProtocols: protocols)
    }

    /// The leader, once its links to every other member showed their level.
    func settledLeader() async throws -> ReplicatedDataStore {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let l = try await ReplicatedDataStoreTests().leader(of: nodes)
            let links = l.transport.links
            if ids.filter({ $0 != l.config.nodeID }).allSatisfy({ links[$0]?.knownLevel != nil }) { return l }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ClusterConfigError("no leader with known links")
    }

    /// Restarts member `k` offering this build's levels (an upgraded member) and returns the
    /// leader once every member showed `level` (or, past a minute, the leader as it stands:
    /// the caller's expectations then say what did not happen).
    func upgrade(_ k: Int, untilMembersSpeak level: Int) async throws -> ReplicatedDataStore {
        await nodes[k].shutdown()
        nodes[k] = try await open(ids[k], PeerTLS.offered)
        let deadline = ContinuousClock.now + .seconds(60)
        var leader = try await settledLeader()
        while !leader.membersSpeak(level) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            leader = try await settledLeader()
        }
        return leader
    }

    /// Runs `body`, then shuts every member down and removes the directory, whatever happened.
    func run(_ body: () async throws -> Void) async throws {
        do { try await body() } catch {
            await close()
            throw error
        }
        await close()
    }

    private func close() async {
        for n in nodes { await n.shutdown() }
        try? FileManager.default.removeItem(atPath: dir)
    }
}
