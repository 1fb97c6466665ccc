import EmberCore
import EmberStorage
import Foundation
import Logging
import Testing
import EmberTestSupport

@testable import EmberCluster
@testable import EmberNodeStore

/// Peer protocol level 4 gates the trigger cursors' `advance` entry (0.6.0, level 3, cannot
/// decode it): three members over real mutual TLS, one offering 0.6.0's levels. While it does,
/// the leader's triggers port says cursors go as `settle` entries and refuses an `advance`
/// entry; `settle` entries are logged and applied everywhere. Once that member runs this build's
/// levels, `advance` is logged and applied on every member.
@Suite(.serialized) struct TriggerAdvanceGateTests {
    static let doc = #"{"a": {"path": "/m/{id}", "on": ["created"], "url": "http://127.0.0.1:9/h", "secret": "0123456789abcdef"}}"#

    @Test(.enabled(if: ReplicatedDataStoreTests.openssl != nil)) func advanceWaitsUntilEveryMemberSpeaksLevel4() async throws {
        let c = try await LevelledTLSCluster("advance-gate", ids: ["n1", "n2", "n3"])
        // n3 offers what 0.6.0 offers.
        let level3 = [PeerTLS.protocolLevel3, PeerTLS.protocolLevel2]
        c.nodes = [try await c.open("n1", PeerTLS.offered), try await c.open("n2", PeerTLS.offered), try await c.open("n3", level3)]
        try await c.run {
        /// Trigger `a`'s cursor on every node, once each applied what the leader committed.
        func cursors() async throws -> [UInt64] {
            var out: [UInt64] = []
            for n in c.nodes {
                try await n.ports.reader.linearizableBarrier()
                out.append(try #require(try n.ports.triggers?.state(namespace: "t", trigger: "a")).cursor)
            }
            return out
        }

        var leader = try await c.settledLeader()
        var port = try #require(leader.ports.triggers)
        try await port.log(namespace: "t", .define(text: Self.doc))
        let group = try #require(try port.definitions(namespace: "t").definitions.first?.group)
        var ix: [UInt64] = []
        for i in 0..<3 {
            ix.append(try await leader.write(WriteRequest(namespace: "t", path: try Path("m/k\(i)"), kind: .set(.int(Int64(i))), identity: .admin)).index)
        }
        // A member at level 3: cursors go as settle entries; an advance entry is refused, nothing logged.
        #expect(!leader.membersSpeak(4) && leader.membersSpeak(3))
        #expect(!port.logsAdvance)
        let before = try await cursors()
        await #expect(throws: StoreUnavailable.self) {
            try await port.log(namespace: "t", .advance([TriggerCursor(name: "a", group: group, through: ix[2], rows: [])]))
        }
        #expect(try await cursors() == before)
        #expect(before.allSatisfy { $0 < ix[0] })
        try await port.log(namespace: "t", .settle(name: "a", indexes: [ix[0], ix[1]], deadLetter: nil))
        #expect(try await cursors() == [ix[1], ix[1], ix[1]])

        // n3 restarts on this build's levels: the gate opens and advance entries apply everywhere.
        leader = try await c.upgrade(2, untilMembersSpeak: 4)
        port = try #require(leader.ports.triggers)
        #expect(port.logsAdvance)
        let more = try await leader.write(WriteRequest(namespace: "t", path: try Path("m/k3"), kind: .set(.int(3)), identity: .admin)).index
        try await port.log(namespace: "t", .advance([TriggerCursor(name: "a", group: group, through: more, rows: [])]))
        #expect(try await cursors() == [more, more, more])
        }
    }
}
