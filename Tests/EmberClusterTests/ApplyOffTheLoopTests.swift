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

    @Test(.enabled(if: ReplicatedDataStoreTests.openssl != nil)) func aLeaderWhoseApplyIsHeldKeepsItsFollowersHearingFromIt() async throws {
        let dir = NSTemporaryDirectory() + "ember-apply-off-loop-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let ids = ["n1", "n2", "n3"]
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
            Thread.detachNewThread { c.resume(with: Result { try ReplicatedDataStoreTests.makeCerts(dir, ids: ids) }) }
        }
        let peers = Dictionary(uniqueKeysWithValues: zip(ids, try FreePorts.pick(ids.count)).map { ($0, PeerAddress(host: "127.0.0.1", port: $1)) })
        var logger = Logger(label: "apply-off-loop-test")
        logger.logLevel = .error
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
        let release = DispatchSemaphore(value: 0)
        defer { release.signal() }  // a failed expectation must not leave the writer held

        let leader = try await ReplicatedDataStoreTests().leader(of: nodes)
        let leaderID = leader.config.nodeID
        let followers = nodes.filter { $0 !== leader }
        // Everything committed so far is applied everywhere: the next apply on the leader is the write's.
        for n in nodes { try await n.ports.reader.linearizableBarrier() }
        let term = leader.host.status.term

        let held = DispatchSemaphore(value: 0)
        let armed = DispatchSemaphore(value: 1)  // one permit: only the first apply is held
        leader.host.store.core.afterReleasedHandOut.withLock {
            $0 = {
                guard armed.wait(timeout: .now()) == .success else { return }
                held.signal()
                release.wait()
            }
        }
        let write = Task {
            try await leader.write(WriteRequest(namespace: "ns", path: try Path("a"), kind: .set(.int(1)), identity: .admin))
        }
        #expect(await Self.wait(held, seconds: 60), "the leader's apply never reached the hold")
        let since = ContinuousClock.now
        // Longer than the longest election timeout (2 × electionTicks ticks), with room to spare.
        let config = leader.config
        let span = Duration.milliseconds(2 * config.electionTicks * config.tickMillis + 500)

        // Event: every follower heard from the leader `span` after the hold began. A follower
        // that campaigns (a new term anywhere) fails it at once instead of at the deadline.
        let deadline = ContinuousClock.now + .seconds(60)
        var heard = false
        while ContinuousClock.now < deadline {
            if nodes.contains(where: { $0.host.status.term != term }) { break }
            heard = followers.allSatisfy { f in
                f.host.lastHeard.withLock { $0[leaderID] }.map { $0 >= since + span } ?? false
            }
            if heard { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(heard, "a follower stopped hearing from the leader while its apply was held")
        #expect(nodes.allSatisfy { $0.host.status.term == term }, "an election began while the leader's apply was held")
        #expect(leader.host.status.role == .leader)

        release.signal()
        let outcome = try await write.value
        #expect(outcome.applied)
        for n in nodes {
            try await n.ports.reader.linearizableBarrier()
            #expect(try n.ports.reader.read(namespace: "ns", path: Path("a")).node == Node(json: .int(1)))
        }
        for n in nodes { await n.shutdown() }
    }
}
