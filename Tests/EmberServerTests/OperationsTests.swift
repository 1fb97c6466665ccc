import EmberTestSupport
import EmberCore
import EmberStorage
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Testing

@testable import EmberCluster
@testable import EmberNodeStore
@testable import EmberServer

/// The operations endpoints and metrics of a real node (EmberNode over a real LMDB store).
@Suite struct OperationsTests {
    static func makeNode(_ configure: (inout NodeConfiguration) -> Void = { _ in }) throws -> (EmberNode, String) {
        let dir = TestDirectory.root + "ember-ops-\(UUID().uuidString)"
        var options = StoreOptions()
        options.mapSize = 1 << 30
        let store = try LMDBDataStore(directory: dir, options: options, logger: Logger(label: "test"))
        var config = NodeConfiguration()
        config.dataDirectory = dir
        configure(&config)
        return (try EmberNode(config: config, ports: store.ports, logger: Logger(label: "test")), dir)
    }

    static func get(_ node: EmberNode, _ path: String, token: String? = nil) async -> Response {
        var fields = HTTPFields()
        if let token { fields[.authorization] = "Bearer \(token)" }
        let head = HTTPRequest(method: .get, scheme: "http", authority: "localhost", path: path, headerFields: fields)
        return await node.admin.respond(to: Request(head: head, body: RequestBody(buffer: ByteBuffer())), channel: nil)
    }

    @Test func clientURLsParseAndBadOnesAreRefused() throws {
        #expect(try OperationsFlags.parseClientURLs(nil) == [:])
        #expect(try OperationsFlags.parseClientURLs("n1=http://a:9000, n2=https://b.example:443") ==
                ["n1": "http://a:9000", "n2": "https://b.example:443"])
        for bad in ["n1", "n1=ftp://a", "bad id=http://a", "n1=http://"] {
            #expect(throws: ClusterConfigError.self, "\(bad)") { try OperationsFlags.parseClientURLs(bad) }
        }
        // The config file's clientUrls key is checked the same way.
        #expect(try OperationsFlags.checkClientURLs(["n1": "https://a:1"]) == ["n1": "https://a:1"])
        for bad in [["n1": "ftp://a"], ["bad id": "http://a"], ["n1": "http://"]] {
            #expect(throws: ClusterConfigError.self, "\(bad)") { try OperationsFlags.checkClientURLs(bad) }
        }
    }

    /// The handshake's `en` (Ember extension) names the configured client URLs of the current
    /// members only, and is absent without configuration.
    @Test func handshakeNamesTheClientURLsOfTheCurrentMembers() {
        var ops = OperationsConfiguration()
        #expect(ops.handshakeClientURLs(directory: nil) == [])
        ops.memberURLs = ["n1": "http://a:1", "n2": "http://b:2", "n3": "http://c:3"]
        #expect(ops.handshakeClientURLs(directory: nil) == ["http://a:1", "http://b:2", "http://c:3"])
        // n3 removed; n4 added at run time with the client URL its operator gave.
        let directory = MemberDirectory(members: ["n1": .init(peer: "h:1"), "n2": .init(peer: "h:2"),
                                                  "n4": .init(peer: "h:4", url: "http://d:4"), "n5": .init(peer: "h:5")])
        #expect(ops.handshakeClientURLs(directory: directory) == ["http://a:1", "http://b:2", "http://d:4"])
        let plain = WireMessages.hello(timestamp: 1, host: "h", session: "s")
        #expect(plain["d"]?["d"]?["en"] == nil && plain["d"]?["d"]?["s"] == .string("s"))
        let named = WireMessages.hello(timestamp: 1, host: "h", session: "s", nodes: ["http://a:1"])
        #expect(named["d"]?["d"]?["en"] == .array([.string("http://a:1")]))
    }

    @Test func writesAndRejectionsShowInMetrics() async throws {
        let (node, _) = try Self.makeNode()
        defer { node.ports.close() }
        for i in 0..<3 {
            _ = try await node.ports.writer.write(WriteRequest(namespace: "t", path: try Path("/k\(i)"), kind: .set(.int(Int64(i))), identity: .admin))
        }
        #expect(await Self.get(node, "/nope").status == .badRequest)
        let text = node.metrics.render(probe: NodeProbe.read(node.ports), websockets: 0, websocketListens: 0, sseStreams: 0)
        #expect(text.contains(#"ember_client_writes_total{result="ok"} 3"#))
        #expect(text.contains("ember_commit_latency_seconds_count 3"))
        #expect(text.contains("ember_committed_entries_total 3"))
        #expect(text.contains("ember_raft_applied_index 3"))
        #expect(text.contains(#"ember_rejected_requests_total{reason="bad_request"} 1"#))
        #expect(text.contains("ember_raft_is_leader 1"))
    }

    @Test func healthReadinessAndAdminOnlyBackup() async throws {
        let (node, _) = try Self.makeNode()
        defer { node.ports.close() }
        #expect(await Self.get(node, "/healthz").status == .ok)
        #expect(await Self.get(node, "/readyz").status == .ok)
        #expect(await Self.get(node, "/.ember/backup").status == .unauthorized)
        #expect(await Self.get(node, "/.ember/backup", token: "not-a-token").status == .unauthorized)
        // A user's token (a JWT with claims, accepted in protected mode) is not an admin.
        let claims = Data(#"{"sub":"u1"}"#.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
        #expect(await Self.get(node, "/.ember/backup", token: "e30.\(claims).sig").status == .unauthorized)
        #expect(await Self.get(node, "/.ember/backup", token: "owner").status == .ok)
    }
}
