import EmberCore
import Foundation
import Testing
import EmberTestSupport
@testable import EmberClient

@Suite(.serialized, .timeLimit(.minutes(2))) struct ClusterFailoverTests {
    /// `oneURL`: the client is given only its first node's URL and learns the others from the
    /// handshake (`--client-urls`); otherwise it is given all of them.
    @Test(.enabled(if: ClusterProcesses.openssl != nil), arguments: [false, true])
    func clientMovesToTheNextNodeWhenItsNodeDies(oneURL: Bool) async throws {
        let cluster = ClusterProcesses()
        var stopped = false
        defer { if !stopped { cluster.stop() } }
        try await cluster.start()
        let ns = "failover\(UInt32.random(in: 0...UInt32.max))"
        // Connected to a follower first. (Killing the leader instead can fail a write in flight
        // with "outcome unknown": the client is told, the SDK does not retry writes.)
        let leader = try #require(try await cluster.leader(among: cluster.ids))
        let order = cluster.ids.filter { $0 != leader } + [leader]
        // In the given order (no spreading: ClusterSpreadTests.swift), so the client starts at order[0].
        var configuration = DatabaseConfiguration.fastReconnect
        configuration.spreadsConnections = false
        let db = oneURL ? Database(urls: [cluster.url(order[0], ns: ns)], configuration: configuration)
                        : Database(urls: order.map { cluster.url($0, ns: ns) }, configuration: configuration)
        defer { db.shutdown() }
        let events = Recorder()
        db.reference(withPath: "room").observe(.childAdded) { s in events.add("\(s.key) \(s.value as? String ?? "")") }
        try await db.reference(withPath: "room/a").setValue("before")
        await events.wait { $0.contains("a before") }
        // The handshake named every node (--client-urls): the client knows all three.
        let connection = try #require(db.repo.connection)
        let known = await connection.urls
        #expect(known.count == 3, "\(known)")

        cluster.kill9(order[0])
        // Written while the client's node is dead: queued, then sent to the next node.
        let done = Recorder()
        db.reference(withPath: "room/b").setValue("during") { error, _ in done.add("done \(error == nil)") }
        await done.wait(timeout: .seconds(30)) { $0 == ["done true"] }
        // Another node's write reaches the listener through the new connection.
        var written = false
        let deadline = ContinuousClock.now + .seconds(20)
        while !written && ContinuousClock.now < deadline {
            // 503 while the survivors elect a leader (if n1 led): retry.
            let (status, _) = try await EmberServerProcess.http("PUT", "http://127.0.0.1:\(cluster.ports[order[1]]!)/room/c.json?ns=\(ns)", body: #""after""#)
            written = status == 200
            if !written { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(written)
        let seen = await events.wait(timeout: .seconds(20)) { $0.contains("b during") && $0.contains("c after") }
        #expect(seen.filter { $0 == "a before" }.count == 1, "no duplicate events after the resync: \(seen)")
        let value = try await db.reference(withPath: "room").getData()
        #expect((value.value as? [String: Any])?.count == 3)
        let now = await connection.url
        #expect(now != Database.websocketURL(for: cluster.url(order[0], ns: ns)), "connected to a surviving node")
        // The client's sockets are closed first, so every node must stop on SIGTERM.
        db.shutdown()
        try await Task.sleep(for: .milliseconds(300))
        stopped = true
        #expect(cluster.stop().isEmpty, "nodes that did not stop on SIGTERM")
    }
}
