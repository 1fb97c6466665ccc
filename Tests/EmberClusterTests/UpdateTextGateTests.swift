import EmberCore
import EmberStorage
import Foundation
import Logging
import Testing
import EmberTestSupport

@testable import EmberCluster
@testable import EmberNodeStore

/// Peer protocol level 5 gates the `updateText` entry (issue 42; 0.7.0, level 4, cannot decode
/// it): three members over real mutual TLS, one offering 0.7.0's levels. While it does, a text
/// update is logged in the tree form (`update`) and applies alike everywhere; once that member
/// runs this build's levels, the text form is logged and applies alike everywhere.
@Suite(.serialized) struct UpdateTextGateTests {
    static func request(_ body: String) throws -> WriteRequest {
        let (text, nodes) = try #require(UpdateText.scan(body: Array(body.utf8), base: Path("d"), maxParts: 1_000, maxNodes: 1_000))
        return WriteRequest(namespace: "t", path: try Path("d"), kind: .updateText(text, nodes: nodes), identity: .admin)
    }

    @Test(.enabled(if: ReplicatedDataStoreTests.openssl != nil)) func theTextFormWaitsUntilEveryMemberSpeaksLevel5() async throws {
        let c = try await LevelledTLSCluster("update-text-gate", ids: ["n1", "n2", "n3"])
        // n3 offers what 0.7.0 offers.
        let level4 = [PeerTLS.protocolLevel4, PeerTLS.protocolLevel3, PeerTLS.protocolLevel2]
        c.nodes = [try await c.open("n1", PeerTLS.offered), try await c.open("n2", PeerTLS.offered), try await c.open("n3", level4)]
        try await c.run {
        /// The value at d on every node, once each applied what the leader committed.
        func values() async throws -> [Node] {
            var out: [Node] = []
            for n in c.nodes {
                try await n.ports.reader.linearizableBarrier()
                out.append(try n.ports.reader.read(namespace: "t", path: Path("d")).node)
            }
            return out
        }

        var leader = try await c.settledLeader()
        #expect(!leader.membersSpeak(5) && leader.membersSpeak(4))
        let first = try Self.request(#"{"a":{"x":1,"y":[true,"s"]},"b/c":2.5,"e":null}"#)
        #expect(!LogEntry.isUpdateText(try leader.payload(for: first).payload))
        _ = try await leader.write(first)
        let want1 = try Node(json: JSON.parse(#"{"a":{"x":1,"y":[true,"s"]},"b":{"c":2.5}}"#))
        #expect(try await values().allSatisfy { $0 == want1 })

        // n3 restarts on this build's levels: the text form is logged and applies everywhere.
        leader = try await c.upgrade(2, untilMembersSpeak: 5)
        #expect(leader.membersSpeak(5))
        let second = try Self.request(#"{"a/x":null,"b/d":{".value":"v",".priority":1},"f":[1,2]}"#)
        #expect(LogEntry.isUpdateText(try leader.payload(for: second).payload))
        _ = try await leader.write(second)
        let want2 = try Node(json: JSON.parse(#"{"a":{"y":[true,"s"]},"b":{"c":2.5,"d":{".value":"v",".priority":1}},"f":[1,2]}"#))
        let got = try await values()
        #expect(got.allSatisfy { $0 == want2 }, "\(got)")
        // Every member holds the same state.
        var hashes = Set<String>()
        for n in c.nodes { hashes.insert(try n.local.storage.stateHash(namespace: "t")) }
        #expect(hashes.count == 1)
        }
    }
}
