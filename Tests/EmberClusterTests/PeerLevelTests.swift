import EmberRaft
import Foundation
import Logging
import Synchronization
import Testing
import EmberTestSupport

@testable import EmberCluster
@testable import EmberNodeStore

/// Peer protocol levels over real mutual TLS: a dialer learns by ALPN whether the node it reached
/// decodes level-2 messages (`.leaderDurable`), and never sends them to one that does not — a
/// node of the previous build would close the link on a message kind it does not know.
@Suite(.serialized) struct PeerLevelTests {
    static let durable = PeerFrame.raft(Message(from: "n1", to: "x", term: 2, payload: .leaderDurable(index: 9)))
    static func heartbeat(_ n: UInt64) -> PeerFrame { .raft(Message(from: "n1", to: "x", term: 2, payload: .heartbeat(commit: n, readContext: n))) }

    /// n1 (this build) dials n2 (offering `peerProtocols`); returns what n2 received after a
    /// heartbeat, a durable notice and another heartbeat were sent once the link was up.
    func received(peerProtocols: [String]) async throws -> [Message.Payload] {
        let dir = NSTemporaryDirectory() + "ember-level-\(UUID().uuidString)"
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
        let got = Mutex<[Message.Payload]>([])
        let n2 = PeerTransport(config: config("n2"), tls: try PeerTLS(certificatePath: "\(dir)/n2.pem", keyPath: "\(dir)/n2.key",
                                                                     caPath: "\(dir)/ca.pem", applicationProtocols: peerProtocols),
                               logger: logger) { frame, _ in
            if case .raft(let m) = frame { got.withLock { $0.append(m.payload) } }
        }
        let n1 = PeerTransport(config: config("n1"), tls: try PeerTLS(certificatePath: "\(dir)/n1.pem", keyPath: "\(dir)/n1.key",
                                                                     caPath: "\(dir)/ca.pem"),
                               logger: logger) { _, _ in }
        try await n2.start()
        try await n1.start()
        /// Waits (30 s at most) for the heartbeat of commit `n` to arrive.
        func waitFor(heartbeat n: UInt64) async throws {
            let deadline = ContinuousClock.now + .seconds(30)
            while !got.withLock({ $0.contains(.heartbeat(commit: n, readContext: n)) }) && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        n1.send(Self.heartbeat(1), to: "n2")
        try await waitFor(heartbeat: 1)
        n1.send(Self.durable, to: "n2")
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

    @Test(.enabled(if: ReplicatedDataStoreTests.openssl != nil)) func aPeerOfThisBuildGetsTheNotice() async throws {
        let got = try await received(peerProtocols: [PeerTLS.protocolLevel2])
        #expect(got == [Self.heartbeat(1), Self.durable, Self.heartbeat(2), Self.heartbeat(3)].compactMap { if case .raft(let m) = $0 { m.payload } else { nil } })
    }

    @Test(.enabled(if: ReplicatedDataStoreTests.openssl != nil)) func aPeerOfThePreviousBuildIsNotSentIt() async throws {
        // No ALPN offered or accepted: how the previous build's TLS configuration looks.
        let got = try await received(peerProtocols: [])
        #expect(got == [.heartbeat(commit: 1, readContext: 1), .heartbeat(commit: 2, readContext: 2), .heartbeat(commit: 3, readContext: 3)])
    }
}
