import EmberCore
import Foundation
import Testing
import EmberTestSupport
@testable import EmberClient

/// Clients spread over a cluster's members and learners (issue 38) on real emberd processes: 3
/// voters and a learner, twelve clients all given n1's URL only. In ClusterFailoverTests' suite,
/// which is serialized: two clusters starting at once (openssl runs block the test threads)
/// starved the other suites' tasks on two cores.
extension ClusterFailoverTests {
    /// The clients' seeds (`NodeListSpreadTests` checks they reach every one of four nodes).
    static let spreadSeeds: [UInt64] = Array(1...12)

    @Test(.enabled(if: ClusterProcesses.openssl != nil))
    func clientsLandOnEveryNodeAndThoseOfADeadLearnerMoveOn() async throws {
        let cluster = ClusterProcesses()
        var stopped = false
        defer { if !stopped { cluster.stop() } }
        try await cluster.start()
        try await cluster.addLearner("n4")
        let ns = "spread\(UInt32.random(in: 0...UInt32.max))"
        try await put(cluster, "room/a", #""1""#, ns: ns)

        let clients = Self.spreadSeeds.map { seed in
            var configuration = DatabaseConfiguration.fastReconnect
            configuration.connectionSeed = seed
            return Database(urls: [cluster.url("n1", ns: ns)], configuration: configuration)
        }
        defer { for db in clients { db.shutdown() } }
        let seen = clients.map { db in
            let r = Recorder()
            db.reference(withPath: "room").observe(.value) { s in
                r.add(((s.value as? [String: Any]) ?? [:]).keys.sorted().joined(separator: ","))
            }
            return r
        }
        for r in seen { await r.wait(timeout: .seconds(30)) { $0.contains("a") } }
        // A listener's first value comes through the node the client settled on (the move is made
        // before anything is sent), so this is where each client is served.
        let landed = try await nodes(of: clients, in: cluster)
        #expect(Set(landed) == Set(cluster.all), "every member and the learner serve clients: \(landed)")

        // A write through the learner is forwarded to the leader and reaches every client.
        let onLearner = landed.indices.filter { landed[$0] == "n4" }
        let written = Recorder()
        let writer = try #require(onLearner.first)
        clients[writer].reference(withPath: "room/viaLearner").setValue("x") { error, _ in written.add("done \(error == nil)") }
        await written.wait(timeout: .seconds(20)) { $0 == ["done true"] }
        for r in seen { await r.wait(timeout: .seconds(20)) { $0.contains("a,viaLearner") } }

        // The learner dies (no write is in doubt: it is in no quorum): its clients go to other
        // nodes and hear a write made at the leader through them.
        cluster.kill9("n4")
        try await put(cluster, "room/b", #""2""#, ns: ns)
        for r in seen { await r.wait(timeout: .seconds(30)) { $0.contains("a,b,viaLearner") } }
        let after = try await nodes(of: clients, in: cluster)
        for i in onLearner {
            #expect(after[i] != "n4" && cluster.ids.contains(after[i]), "client \(i) moved on: \(after)")
            #expect(await clients[i].repo.connection.isConnected)
        }
        // The others stayed where they were.
        for i in landed.indices where !onLearner.contains(i) { #expect(after[i] == landed[i]) }

        for db in clients { db.shutdown() }
        try await Task.sleep(for: .milliseconds(300))
        stopped = true
        #expect(cluster.stop().isEmpty, "nodes that did not stop on SIGTERM")
    }

    /// The node id each client's connection uses (by its port).
    private func nodes(of clients: [Database], in cluster: ClusterProcesses) async throws -> [String] {
        var out: [String] = []
        for db in clients {
            let url = await db.repo.connection.url
            let port = try #require(URLComponents(string: url)?.port)
            out.append(try #require(cluster.ports.first { $0.value == port }?.key))
        }
        return out
    }

    /// A REST write at the leader, retried while a leader is being elected (503).
    private func put(_ cluster: ClusterProcesses, _ path: String, _ body: String, ns: String) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if let leader = try? await cluster.leader(among: cluster.ids),
               let (status, _) = try? await EmberServerProcess.http("PUT", "http://127.0.0.1:\(cluster.ports[leader]!)/\(path).json?ns=\(ns)", body: body),
               status == 200 { return }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw TestFailure("PUT \(path) did not succeed within 30 s")
    }
}
