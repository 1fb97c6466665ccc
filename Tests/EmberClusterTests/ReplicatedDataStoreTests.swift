import EmberCore
import EmberStorage
import Foundation
import Logging
import Testing
import EmberTestSupport

#if canImport(Glibc)
import Glibc
#endif

@testable import EmberCluster
@testable import EmberNodeStore

/// Three `ReplicatedDataStore`s in one process, talking over real mutual TLS on loopback.
/// Certificates come from the openssl CLI (the test is skipped without it).
@Suite(.serialized) struct ReplicatedDataStoreTests {
    static let openssl = ["/usr/bin/openssl", "/usr/local/bin/openssl"].first { FileManager.default.isExecutableFile(atPath: $0) }

    static func run(_ args: [String]) throws { try ChildProcess.run(openssl!, args) }

    static func makeCerts(_ dir: String, ids: [String]) throws {
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try run(["req", "-x509"] + ec + ["-keyout", "\(dir)/ca.key", "-out", "\(dir)/ca.pem", "-days", "2", "-subj", "/CN=test-ca"])
        for id in ids {
            try "subjectAltName=DNS:\(id),IP:127.0.0.1\n".write(toFile: "\(dir)/\(id).ext", atomically: true, encoding: .utf8)
            try run(["req"] + ec + ["-keyout", "\(dir)/\(id).key", "-out", "\(dir)/\(id).csr", "-subj", "/CN=\(id)"])
            try run(["x509", "-req", "-in", "\(dir)/\(id).csr", "-CA", "\(dir)/ca.pem", "-CAkey", "\(dir)/ca.key",
                     "-CAcreateserial", "-out", "\(dir)/\(id).pem", "-days", "2", "-extfile", "\(dir)/\(id).ext"])
        }
    }

    func leader(of nodes: [ReplicatedDataStore], timeout: Duration = .seconds(60)) async throws -> ReplicatedDataStore {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let leaders = nodes.filter { $0.host.status.role == .leader }
            let views = Set(nodes.map { $0.host.status.leaderID })
            if leaders.count == 1, views == [leaders[0].config.nodeID] { return leaders[0] }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ClusterConfigError("no leader within \(timeout)")
    }

    /// Three members over real mutual TLS in a fresh directory (returned, to remove at the end).
    static func openThree(configure: (inout ClusterConfiguration) -> Void = { _ in }) async throws -> (dir: String, nodes: [ReplicatedDataStore]) {
        let dir = TestDirectory.root + "ember-rds-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let ids = ["n1", "n2", "n3"]
        // openssl runs as blocking child processes: keep them off the cooperative pool, which
        // the other suites' async tests share.
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
            Thread.detachNewThread { c.resume(with: Result { try Self.makeCerts(dir, ids: ids) }) }
        }
        let peers = Dictionary(uniqueKeysWithValues: zip(ids, try FreePorts.pick(ids.count)).map { ($0, PeerAddress(host: "127.0.0.1", port: $1)) })
        var logger = Logger(label: "rds-test")
        logger.logLevel = .error
        var options = StoreOptions()
        options.mapSize = 1 << 28
        var nodes: [ReplicatedDataStore] = []
        for id in ids {
            var c = ClusterConfiguration(nodeID: id, peerListen: peers[id]!, peers: peers, tlsCertificatePath: "\(dir)/\(id).pem",
                                         tlsKeyPath: "\(dir)/\(id).key", tlsCAPath: "\(dir)/ca.pem")
            // Parallel suites can starve this one of threads for seconds: timing is the Python
            // suite's business, here only outcomes are checked.
            c.noLeaderTimeoutSeconds = 60
            c.writeTimeoutSeconds = 60
            c.forwardReplyTimeoutSeconds = 60
            configure(&c)
            nodes.append(try await ReplicatedDataStore.open(directory: "\(dir)/\(id)", options: options, cluster: c, logger: logger))
        }
        return (dir, nodes)
    }

    @Test(.enabled(if: openssl != nil)) func threeNodesReplicateAndHandOver() async throws {
        let (dir, nodes) = try await Self.openThree()
        let first = try await leader(of: nodes)
        let follower = nodes.first { $0 !== first }!

        // A write through a follower is applied there before it is acknowledged.
        let outcome = try await follower.write(
            WriteRequest(namespace: "ns", path: try Path("a"), kind: .set(.object(["v": .int(1)])), identity: .admin))
        #expect(outcome.applied && follower.appliedIndex >= outcome.index)
        #expect(try follower.reader.read(namespace: "ns", path: Path("a/v")).node == Node(json: .int(1)))
        // Every node sees it after a linearizable barrier (the read port's, a Raft ReadIndex).
        for n in nodes {
            try await n.ports.reader.linearizableBarrier()
            #expect(try n.ports.reader.read(namespace: "ns", path: Path("a/v")).node == Node(json: .int(1)))
        }
        // The membership namespace is the cluster's own: the member's read and write ports refuse it.
        #expect(throws: StoreRefusal.forbidden("Namespace \(MemberDirectory.namespace) is reserved for cluster membership; use /.ember/status")) {
            _ = try follower.ports.reader.read(namespace: MemberDirectory.namespace, path: .root)
        }
        await #expect(throws: StoreRefusal.self) {
            _ = try await follower.ports.writer.write(WriteRequest(namespace: MemberDirectory.namespace, path: try Path("x"),
                                                                   kind: .set(.int(1)), identity: .admin))
        }
        guard case .object(let status) = try await first.nodeStatus(), case .object(let progress)? = status["peers"] else {
            Issue.record("leader status without peers")
            return
        }
        #expect(status["role"] == .string("leader") && progress.count == 2)

        // A stopping leader hands over: the others have a new leader quickly.
        await first.shutdown()
        let rest = nodes.filter { $0 !== first }
        let second = try await leader(of: rest, timeout: .seconds(60))
        #expect(second !== first)
        let again = try await rest.first { $0 !== second }!.write(
            WriteRequest(namespace: "ns", path: try Path("b"), kind: .set(.int(2)), identity: .admin))
        #expect(again.applied)
        for n in rest { await n.shutdown() }
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// A leader appends its own clients' writes from the entries it checked (not decoded from
    /// their bytes): each member applies the same entry, the leader's timestamp included, so a
    /// server timestamp and a bulk update read the same on every member and their states hash alike.
    @Test(.enabled(if: openssl != nil)) func aLeadersOwnWritesApplyAlikeOnEveryMember() async throws {
        let (dir, nodes) = try await Self.openThree()
        let first = try await leader(of: nodes)
        let stamp = try await first.write(WriteRequest(namespace: "ns", path: try Path("stamp"),
                                                      kind: .set(.object(["at": .object([".sv": .string("timestamp")])])), identity: .admin))
        #expect(stamp.applied)
        var parts: [(Path, JSON)] = []
        for i in 0..<200 {
            parts.append((try Path("u\(i)"), .object(["n": .int(Int64(i)), "d": .double(Double(i) + 0.5), "tags": .object(["t\(i % 7)": .bool(true)]),
                                                     ".priority": .string("p\(i % 3)")])))
        }
        #expect(try await first.write(WriteRequest(namespace: "ns", path: try Path("users"), kind: .update(parts), identity: .admin)).applied)
        let at = try first.reader.read(namespace: "ns", path: Path("stamp/at")).node
        guard case .int(let ms)? = at.leaf else {
            Issue.record("no server timestamp on the leader: \(at)")
            return
        }
        #expect(ms > 1_700_000_000_000)
        var hashes: Set<String> = []
        for n in nodes {
            try await n.ports.reader.linearizableBarrier()
            #expect(try n.reader.read(namespace: "ns", path: Path("stamp/at")).node == at)
            #expect(try n.reader.read(namespace: "ns", path: Path("users/u7/d")).node == Node(.double(7.5)))
            hashes.insert(try n.local.storage.stateHash(namespace: "ns"))
        }
        #expect(hashes.count == 1, "members hold the same state")
        for n in nodes { await n.shutdown() }
        try? FileManager.default.removeItem(atPath: dir)
    }
}
