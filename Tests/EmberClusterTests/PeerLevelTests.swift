import EmberRaft
import Foundation
import Logging
import Synchronization
import Testing
import EmberTestSupport

@testable import EmberCluster
@testable import EmberNodeStore

/// Peer protocol levels over real mutual TLS: a dialer learns by ALPN which level the node it
/// reached decodes (2: `.leaderDurable`, 3: `HashCheck`), and never sends a frame of a later
/// level — a node of an older build would close the link on a message kind it does not know.
@Suite(.serialized) struct PeerLevelTests {
    static let durable = PeerFrame.raft(Message(from: "n1", to: "x", term: 2, payload: .leaderDurable(index: 9)))
    static func heartbeat(_ n: UInt64) -> PeerFrame { .raft(Message(from: "n1", to: "x", term: 2, payload: .heartbeat(commit: n, readContext: n))) }

    /// What a frame is, as the tests compare it (a raft message by its payload).
    static func label(_ f: PeerFrame) -> String {
        switch f {
        case .raft(let m): return "\(m.payload)"
        case .hashCheck(let h): return "hash \(h.appliedIndex) \(h.stateHash) \(h.ask)"
        default: return "\(f)"
        }
    }

    static let hashCheck = PeerFrame.hashCheck(HashCheck(from: "n1", appliedIndex: 7, stateHash: "", ask: true))
    /// Sent before the link is up: queued, then kept or dropped once the level is known.
    static let earlyHashCheck = PeerFrame.hashCheck(HashCheck(from: "n1", appliedIndex: 6, stateHash: "", ask: true))

    /// n1 (this build) dials n2 (offering `peerProtocols`); returns every frame n2 received after
    /// a hash check and heartbeat 1 were sent before the link was up, then a durable notice, a
    /// hash check and heartbeats 2 and 3 once it was.
    func receivedFrames(peerProtocols: [String]) async throws -> [PeerFrame] {
        let dir = TestDirectory.root + "ember-level-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let ids = ["n1", "n2"]
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
            Thread.detachNewThread { c.resume(with: Result { try ReplicatedDataStoreTests.makeCerts(dir, ids: ids) }) }
        }
        let ports = try FreePorts.pick(2)
        let peers = ["n1": PeerAddress(host: "127.0.0.1", port: ports[0]), "n2": PeerAddress(host: "127.0.0.1", port: ports[1])]
        var logger = Logger(label: "level-test")
        logger.logLevel = .error
        func config(_ id: String) -> ClusterConfiguration {
            ClusterConfiguration(nodeID: id, peerListen: peers[id]!, peers: peers, tlsCertificatePath: "\(dir)/\(id).pem",
                                 tlsKeyPath: "\(dir)/\(id).key", tlsCAPath: "\(dir)/ca.pem")
        }
        let got = Mutex<[PeerFrame]>([])
        let n2 = PeerTransport(config: config("n2"), tls: try PeerTLS(certificatePath: "\(dir)/n2.pem", keyPath: "\(dir)/n2.key",
                                                                     caPath: "\(dir)/ca.pem", applicationProtocols: peerProtocols),
                               logger: logger) { frame, _ in
            got.withLock { $0.append(frame) }
        }
        let n1 = PeerTransport(config: config("n1"), tls: try PeerTLS(certificatePath: "\(dir)/n1.pem", keyPath: "\(dir)/n1.key",
                                                                     caPath: "\(dir)/ca.pem"),
                               logger: logger) { _, _ in }
        try await n2.start()
        try await n1.start()
        /// Waits (30 s at most) for the heartbeat of commit `n` to arrive.
        func waitFor(heartbeat n: UInt64) async throws {
            let deadline = ContinuousClock.now + .seconds(30)
            while !got.withLock({ $0.map(Self.label).contains(Self.label(Self.heartbeat(n))) }) && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        n1.send(Self.earlyHashCheck, to: "n2")
        n1.send(Self.heartbeat(1), to: "n2")
        try await waitFor(heartbeat: 1)
        n1.send(Self.durable, to: "n2")
        n1.send(Self.hashCheck, to: "n2")
        n1.send(Self.heartbeat(2), to: "n2")
        // The barrier: one link delivers in order, so once heartbeat 3 is in, anything sent
        // before it (a notice that should not have gone out) is in too.
        n1.send(Self.heartbeat(3), to: "n2")
        try await waitFor(heartbeat: 3)
        #expect(n1.connectedPeers() == ["n2"], "the link stayed up")
        await n1.shutdown()
        await n2.shutdown()
        return got.withLock { $0 }
    }

    @Test(.enabled(if: ReplicatedDataStoreTests.openssl != nil)) func aPeerOfThisBuildGetsEveryFrame() async throws {
        let got = try await receivedFrames(peerProtocols: PeerTLS.offered)
        #expect(got.map(Self.label) == [Self.earlyHashCheck, Self.heartbeat(1), Self.durable, Self.hashCheck, Self.heartbeat(2), Self.heartbeat(3)].map(Self.label))
    }

    @Test(.enabled(if: ReplicatedDataStoreTests.openssl != nil)) func aLevel2PeerGetsTheNoticeButNoHashCheck() async throws {
        // How 0.5.0 looks: it offers level 2 only (it knows the frame kind, not the request form).
        let got = try await receivedFrames(peerProtocols: [PeerTLS.protocolLevel2])
        #expect(got.map(Self.label) == [Self.heartbeat(1), Self.durable, Self.heartbeat(2), Self.heartbeat(3)].map(Self.label))
    }

    @Test(.enabled(if: ReplicatedDataStoreTests.openssl != nil)) func aPeerOfThePreviousBuildIsNotSentIt() async throws {
        // No ALPN offered or accepted: how the previous build's TLS configuration looks.
        let got = try await receivedFrames(peerProtocols: [])
        #expect(got.map(Self.label) == [Self.heartbeat(1), Self.heartbeat(2), Self.heartbeat(3)].map(Self.label))
    }
}
