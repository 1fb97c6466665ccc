import EmberCore
import EmberStorage
import Foundation
import Logging
import Testing
import EmberTestSupport

@testable import EmberCluster
@testable import EmberNodeStore

/// Peer protocol level 5 gates a trigger definition with a `batchWindowMs` (0.7.0, level 4,
/// refuses a field it does not know, and would fire none of the namespace's triggers): three
/// members over real mutual TLS, one offering 0.7.0's levels. While it does, the leader refuses
/// such a definition and logs one without the field (its canonical text names no window); once
/// that member runs this build's levels, the window is logged and every member holds it.
@Suite(.serialized) struct TriggerWindowGateTests {
    static func doc(window: Int?) -> String {
        #"{"a": {"path": "/m/{id}", "on": ["created"], "url": "http://127.0.0.1:9/h", "secret": "0123456789abcdef", "batchSize": 10"#
            + (window.map { #", "batchWindowMs": \#($0)"# } ?? "") + "}}"
    }

    @Test(.enabled(if: ReplicatedDataStoreTests.openssl != nil)) func aBatchingWindowWaitsUntilEveryMemberSpeaksLevel5() async throws {
        let c = try await LevelledTLSCluster("window-gate", ids: ["n1", "n2", "n3"])
        // n3 offers what 0.7.0 offers.
        let level4 = [PeerTLS.protocolLevel4, PeerTLS.protocolLevel3, PeerTLS.protocolLevel2]
        c.nodes = [try await c.open("n1", PeerTLS.offered), try await c.open("n2", PeerTLS.offered), try await c.open("n3", level4)]
        try await c.run {
        /// Trigger `a`'s window on every node, once each applied what the leader committed.
        func windows() async throws -> [Int?] {
            var out: [Int?] = []
            for n in c.nodes {
                try await n.ports.reader.linearizableBarrier()
                out.append(try #require(n.ports.triggers).definitions(namespace: "t").definitions.first?.limits.batchWindowMs)
            }
            return out
        }

        var leader = try await c.settledLeader()
        var port = try #require(leader.ports.triggers)
        #expect(!leader.membersSpeak(5) && leader.membersSpeak(4))
        await #expect(throws: StoreUnavailable.self) { try await port.log(namespace: "t", .define(text: Self.doc(window: 50))) }
        #expect(try await windows() == [nil, nil, nil], "nothing logged")
        // Without the field the definition is logged (every member reads it).
        try await port.log(namespace: "t", .define(text: try TriggerSet(text: Self.doc(window: nil)).text))
        #expect(try await windows() == [0, 0, 0])

        // n3 restarts on this build's levels: the gate opens and every member holds the window.
        leader = try await c.upgrade(2, untilMembersSpeak: 5)
        port = try #require(leader.ports.triggers)
        try await port.log(namespace: "t", .define(text: try TriggerSet(text: Self.doc(window: 50)).text))
        #expect(try await windows() == [50, 50, 50])
        }
    }
}
