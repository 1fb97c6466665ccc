import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore

/// The emberd processes one realtime phase runs against: a single node, or (`--cluster`) a
/// 3-node local cluster with peers over mutual TLS, where the bench writes at the leader and
/// listens on a follower (followers fan out the changes they apply).
struct RealtimeNodes: Sendable {
    /// Where the bench's REST writes go (the leader in a cluster).
    let writer: EmberdInstance
    /// Where the listeners connect and whose CPU and memory are measured (a follower in a cluster).
    let listener: EmberdInstance
    let all: [EmberdInstance]

    var isCluster: Bool { all.count > 1 }

    func stop() {
        for n in all { n.stop() }
    }

    /// The listening node's role as printed.
    var listenerRole: String { isCluster ? "follower emberd" : "emberd" }

    static func start(cluster: Bool, emberd: String, openssl: String, http: HTTPClient, namespace: String) async throws -> RealtimeNodes {
        guard cluster else {
            let node = try await EmberdInstance.start(emberd, http: http, namespace: namespace)
            return RealtimeNodes(writer: node, listener: node, all: [node])
        }
        let dir = NSTemporaryDirectory() + "ember-rtbench-cluster-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let ids = ["n1", "n2", "n3"]
        try makePeerCertificates(openssl: openssl, dir: dir, ids: ids)
        let base = 21_000 + Int.random(in: 0..<900) * 10
        let peers = ids.enumerated().map { "\($1)=127.0.0.1:\(base + 5 + $0)" }.joined(separator: ",")
        var nodes: [EmberdInstance] = []
        do {
            for (i, id) in ids.enumerated() {
                nodes.append(try EmberdInstance.launch(emberd, port: base + i, namespace: namespace, dir: "\(dir)/\(id)", extra: [
                    "--node-id", id, "--peers", peers,
                    "--peer-tls-cert", "\(dir)/\(id).pem", "--peer-tls-key", "\(dir)/\(id).key", "--peer-tls-ca", "\(dir)/ca.pem",
                ]))
            }
            for n in nodes { try await n.waitReady(http) }
            let leader = try await waitForLeader(http, nodes)
            let follower = nodes.first { $0.port != leader.port }!
            return RealtimeNodes(writer: leader, listener: follower, all: nodes)
        } catch {
            for n in nodes { n.stop() }
            throw error
        }
    }

    /// Waits until every node names the same leader; returns it.
    static func waitForLeader(_ http: HTTPClient, _ nodes: [EmberdInstance]) async throws -> EmberdInstance {
        for _ in 0..<600 {
            var leaders = Set<String>()
            var leaderNode: EmberdInstance?
            for n in nodes {
                guard let r = try? await http.execute(HTTPClientRequest(url: n.httpBase + "/.ember/status"), timeout: .seconds(1)),
                      let body = try? await r.body.collect(upTo: 1 << 20),
                      let obj = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any],
                      let leader = obj["leader"] as? String else { leaders.insert(""); continue }
                leaders.insert(leader)
                if obj["role"] as? String == "leader" { leaderNode = n }
            }
            if leaders.count == 1, leaders.first != "", let leaderNode { return leaderNode }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ValidationError("the Ember cluster elected no leader")
    }
}
