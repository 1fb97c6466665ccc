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
        await c.nodes[2].shutdown()
        c.nodes[2] = try await c.open("n3", PeerTLS.offered)
        let deadline = ContinuousClock.now + .seconds(60)
        repeat {
            leader = try await c.settledLeader()
            if leader.membersSpeak(5) { break }
            try await Task.sleep(for: .milliseconds(20))
        } while ContinuousClock.now < deadline
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

    /// A seeded value (strings, numbers, booleans, objects, arrays, priorities) as JSON text.
    static func value(_ g: inout SplitMix64, depth: Int = 0) -> String {
        switch Int.random(in: 0..<(depth > 2 ? 5 : 8), using: &g) {
        case 0: return ["true", "false", "null"].randomElement(using: &g)!
        case 1: return String(Int64.random(in: -99_999...99_999, using: &g))
        case 2: return String(Double(Int.random(in: -999...999, using: &g)) / 8)
        case 3: return "\"" + String(repeating: "s", count: Int.random(in: 0...120, using: &g)) + "é\""
        case 4: return #"{".value":"v\#(Int.random(in: 0...9, using: &g))",".priority":\#(Int.random(in: 1...9, using: &g))}"#
        case 5: return "[" + (0..<Int.random(in: 0...3, using: &g)).map { _ in value(&g, depth: depth + 1) }.joined(separator: ",") + "]"
        default:
            var members = (0..<Int.random(in: 0...5, using: &g)).map { #""k\#($0)":"# + value(&g, depth: depth + 1) }
            if Bool.random(using: &g) { members.append(#"".priority":"p""#) }
            return "{" + members.joined(separator: ",") + "}"
        }
    }

    /// The leader applies its own text updates with the nodes its front built (carried on the
    /// entry, never sent); the followers build them from the text: every member ends in the
    /// same state, update after update.
    @Test(.enabled(if: ReplicatedDataStoreTests.openssl != nil)) func theLeadersCarriedNodesApplyAsTheFollowersText() async throws {
        let c = try await LevelledTLSCluster("update-text-carry", ids: ["n1", "n2", "n3"])
        for id in c.ids { c.nodes.append(try await c.open(id, PeerTLS.offered)) }
        try await c.run {
        var g = TestSeed.generator(0xCA22_C1A5)
        let deadline = ContinuousClock.now + .seconds(60)
        var leader = try await c.settledLeader()
        while !leader.membersSpeak(5) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            leader = try await c.settledLeader()
        }
        #expect(leader.membersSpeak(5))
        var written = 0
        for round in 0..<40 {
            let parts = (0..<[1, 4, 30].randomElement(using: &g)!).map { #""r\#(round)/p\#($0)":"# + Self.value(&g) }
            let request = try Self.request("{" + parts.joined(separator: ",") + "}")
            #expect(LogEntry.isUpdateText(try leader.payload(for: request).payload))
            if try await leader.write(request).applied { written += 1 }
        }
        #expect(written == 40)
        var hashes = Set<String>()
        for n in c.nodes {
            try await n.ports.reader.linearizableBarrier()
            hashes.insert(try n.local.storage.stateHash(namespace: "t"))
        }
        #expect(hashes.count == 1, "\(hashes)")
        }
    }
}
