import EmberCore
import Foundation
import Logging
import Testing
import EmberTestSupport

@testable import EmberCluster
@testable import EmberNodeStore
@testable import EmberStorage

/// Issue 42: a committed entry's apply runs off the Raft loop. Three members over real mutual
/// TLS; the leader's apply is held on its writer thread (after its results were handed out,
/// before its commit: where a bulk import's multi-MB entry spends its seconds) for longer than
/// any election timeout. Its followers must keep hearing from it and nobody may campaign; with
/// the loop awaiting the apply (before the fix) they heard nothing, and a new term began.
@Suite(.serialized) struct ApplyOffTheLoopTests {
    /// Waits for `s` on a thread of its own (not the cooperative pool); false after `seconds`.
    static func wait(_ s: DispatchSemaphore, seconds: Double) async -> Bool {
        await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            Thread.detachNewThread { c.resume(returning: s.wait(timeout: .now() + seconds) == .success) }
        }
    }

    /// Three members over mutual TLS in `dir`, the first apply on the leader held on its writer
    /// (after its results were handed out, before its commit) until `release` is signalled.
    struct HeldCluster {
        let nodes: [ReplicatedDataStore]
        let leader: ReplicatedDataStore
        let followers: [ReplicatedDataStore]
        let term: UInt64
        let held = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
    }

    /// `holdOnLeader` false: nothing is held (the caller installs its own hold).
    static func heldCluster(_ dir: String, holdOnLeader: Bool = true) async throws -> HeldCluster {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let ids = ["n1", "n2", "n3"]
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
            Thread.detachNewThread { c.resume(with: Result { try ReplicatedDataStoreTests.makeCerts(dir, ids: ids) }) }
        }
        let peers = Dictionary(uniqueKeysWithValues: zip(ids, try FreePorts.pick(ids.count)).map { ($0, PeerAddress(host: "127.0.0.1", port: $1)) })
        var logger = Logger(label: "apply-off-loop-test")
        logger.logLevel = ProcessInfo.processInfo.environment["EMBER_TEST_LOG"] != nil ? .info : .error
        var options = StoreOptions()
        options.mapSize = 1 << 28
        var nodes: [ReplicatedDataStore] = []
        for id in ids {
            var c = ClusterConfiguration(nodeID: id, peerListen: peers[id]!, peers: peers, tlsCertificatePath: "\(dir)/\(id).pem",
                                         tlsKeyPath: "\(dir)/\(id).key", tlsCAPath: "\(dir)/ca.pem")
            c.noLeaderTimeoutSeconds = 60
            c.writeTimeoutSeconds = 60
            c.forwardReplyTimeoutSeconds = 60
            nodes.append(try await ReplicatedDataStore.open(directory: "\(dir)/\(id)", options: options, cluster: c, logger: logger))
        }
        let leader = try await ReplicatedDataStoreTests().leader(of: nodes)
        // Everything committed so far is applied everywhere: the next apply on the leader is the write's.
        for n in nodes { try await n.ports.reader.linearizableBarrier() }
        let cluster = HeldCluster(nodes: nodes, leader: leader, followers: nodes.filter { $0 !== leader }, term: leader.host.status.term)
        guard holdOnLeader else { return cluster }
        let armed = DispatchSemaphore(value: 1)  // one permit: only the first apply is held
        let (held, release) = (cluster.held, cluster.release)
        leader.host.store.core.afterReleasedHandOut.withLock {
            $0 = {
                guard armed.wait(timeout: .now()) == .success else { return }
                held.signal()
                release.wait()
            }
        }
        return cluster
    }

    /// Event: every follower heard from the leader longer than any election timeout (with room
    /// to spare) after `since`. A new term anywhere fails it at once instead of at the deadline.
    static func followersKeepHearing(_ c: HeldCluster, since: ContinuousClock.Instant) async throws -> Bool {
        let config = c.leader.config
        let span = Duration.milliseconds(2 * config.electionTicks * config.tickMillis + 500)
        let leaderID = config.nodeID
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if c.nodes.contains(where: { $0.host.status.term != c.term }) { return false }
            let heard = c.followers.allSatisfy { f in
                f.host.lastHeard.withLock { $0[leaderID] }.map { $0 >= since + span } ?? false
            }
            if heard { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    static func write(_ node: ReplicatedDataStore, _ path: String, _ value: JSON) -> Task<EmberNodeStore.WriteOutcome, any Error> {
        Task { try await node.write(WriteRequest(namespace: "ns", path: try Path(path), kind: .set(value), identity: .admin)) }
    }

    @Test(.enabled(if: ReplicatedDataStoreTests.openssl != nil)) func aLeaderWhoseApplyIsHeldKeepsItsFollowersHearingFromIt() async throws {
        let dir = TestDirectory.root + "ember-apply-off-loop-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let c = try await Self.heldCluster(dir)
        defer { c.release.signal() }  // a failed expectation must not leave the writer held

        let write = Self.write(c.leader, "a", .int(1))
        #expect(await Self.wait(c.held, seconds: 60), "the leader's apply never reached the hold")
        #expect(try await Self.followersKeepHearing(c, since: .now), "a follower stopped hearing from the leader while its apply was held")
        #expect(c.nodes.allSatisfy { $0.host.status.term == c.term }, "an election began while the leader's apply was held")
        #expect(c.leader.host.status.role == .leader)

        c.release.signal()
        let outcome = try await write.value
        #expect(outcome.applied)
        for n in c.nodes {
            try await n.ports.reader.linearizableBarrier()
            #expect(try n.ports.reader.read(namespace: "ns", path: Path("a")).node == Node(json: .int(1)))
        }
        for n in c.nodes { await n.shutdown() }
    }

    /// A pipelined import's shape: the leader's next writes arrive while its apply is held, so
    /// their persists queue on the writer behind it. The loop must not wait for them (before,
    /// it did, sent no heartbeats, and a follower campaigned); they are durable, committed and
    /// answered once the apply lets the writer go, in order, on every member.
    @Test(.enabled(if: ReplicatedDataStoreTests.openssl != nil)) func aLeaderWhosePersistWaitsBehindAHeldApplyKeepsItsFollowersHearingFromIt() async throws {
        let dir = TestDirectory.root + "ember-persist-off-loop-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let c = try await Self.heldCluster(dir)
        defer { c.release.signal() }

        // A long apply (an import chunk's size, more than `applyInLoopMaxBytes` of entry).
        let big = String(repeating: "x", count: RaftHost.applyInLoopMaxBytes + 4_096)
        let first = Self.write(c.leader, "a", .string(big))
        #expect(await Self.wait(c.held, seconds: 60), "the leader's apply never reached the hold")
        // Writes through the leader and through a follower (forwarded): each needs a persist on
        // the leader, queued behind the held apply.
        let later = [Self.write(c.leader, "b", .int(2)), Self.write(c.followers[0], "c", .int(3)), Self.write(c.leader, "a", .int(4))]
        #expect(try await Self.followersKeepHearing(c, since: .now), "a follower stopped hearing from the leader while its persist waited")
        #expect(c.nodes.allSatisfy { $0.host.status.term == c.term }, "an election began while the leader's persist waited")
        #expect(c.leader.host.status.role == .leader)

        c.release.signal()
        #expect(try await first.value.applied)
        for w in later { #expect(try await w.value.applied) }
        try await Self.expectEverywhere(c, ["a": .int(4), "b": .int(2), "c": .int(3)])
    }

    /// Every member reads `values` after a linearizable barrier, all in the cluster's first
    /// term; then the members shut down.
    static func expectEverywhere(_ c: HeldCluster, _ values: [String: JSON]) async throws {
        for n in c.nodes {
            try await n.ports.reader.linearizableBarrier()
            for (path, value) in values.sorted(by: { $0.key < $1.key }) {
                #expect(try n.ports.reader.read(namespace: "ns", path: Path(path)).node == Node(json: value), "\(path) on \(n.config.nodeID)")
            }
        }
        #expect(Set(c.nodes.map { $0.host.status.term }) == [c.term])
        for n in c.nodes { await n.shutdown() }
    }
}
