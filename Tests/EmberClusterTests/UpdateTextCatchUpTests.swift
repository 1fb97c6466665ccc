import EmberCore
import EmberStorage
import Foundation
import Logging
import Testing
import EmberTestSupport

@testable import EmberCluster
@testable import EmberNodeStore

/// A member of 0.7.0 (peer level 4) must never be sent an `updateText` entry (it cannot decode
/// it): three members over real mutual TLS log text updates at level 5; a follower is stopped,
/// its directory wiped, and it starts again offering only 0.7.0's levels. The leader's log still
/// holds the text entries from index 1, so the member is sent a snapshot past the last of them
/// instead: it catches up, holds the same state, and its log starts after the last text entry.
@Suite(.serialized) struct UpdateTextCatchUpTests {
    static func isText(_ e: EmberStorage.LogEntry) -> Bool {
        if case .updateText = e.operation { return true }
        return false
    }

    @Test(.enabled(if: ReplicatedDataStoreTests.openssl != nil)) func wipedLevel4MemberGetsASnapshotPastTheLastTextEntry() async throws {
        let c = try await LevelledTLSCluster("update-text-catchup", ids: ["n1", "n2", "n3"])
        for id in c.ids { c.nodes.append(try await c.open(id, PeerTLS.offered)) }
        try await c.run {
        var leader = try await c.settledLeader()
        #expect(leader.membersSpeak(5))
        for i in 0..<3 { _ = try await leader.write(try UpdateTextGateTests.request(#"{"r\#(i)/a":\#(i),"r\#(i)/b":{"x":"y"}}"#)) }

        // A follower goes down; one more text update is logged meanwhile (its last connection
        // showed level 5), then it comes back wiped, offering what 0.7.0 offers.
        let f = try #require(c.nodes.firstIndex { $0.config.nodeID != leader.config.nodeID })
        let fid = c.nodes[f].config.nodeID
        await c.nodes[f].shutdown()
        try FileManager.default.removeItem(atPath: "\(c.dir)/\(fid)")
        _ = try await leader.write(try UpdateTextGateTests.request(#"{"r3/a":3}"#))
        let leaderLog = try TriggerAdvanceCatchUpTests.storedLog(leader)
        let lastText = try #require(leaderLog.filter(Self.isText).last?.index)
        #expect(leader.local.storage.firstLogIndex == 1, "the leader's log still holds every text entry")

        c.nodes[f] = try await c.open(fid, [PeerTLS.protocolLevel4, PeerTLS.protocolLevel3, PeerTLS.protocolLevel2])
        let wiped = c.nodes[f]
        leader = try await c.settledLeader()
        #expect(!leader.membersSpeak(5))

        // It catches up to a write made after it came back (in the tree form: a member at level 4).
        let late = try UpdateTextGateTests.request(#"{"r4/a":4}"#)
        #expect(!LogEntry.isUpdateText(try leader.payload(for: late).payload))
        let after = try await leader.write(late).index
        let deadline = ContinuousClock.now + .seconds(60)
        while wiped.appliedIndex < after && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(wiped.appliedIndex >= after)
        try await TriggerAdvanceCatchUpTests.expectSameState(leader, wiped)
        // It was never sent a text entry: a snapshot at or past the last one, its log after it.
        try await TriggerAdvanceCatchUpTests.awaitSnapshotStatus(wiped, atLeast: lastText)
        #expect(wiped.host.status.snapshotIndex >= lastText)
        #expect(wiped.local.storage.firstLogIndex > lastText)
        #expect(!(try TriggerAdvanceCatchUpTests.storedLog(wiped)).contains(where: Self.isText))
        }
    }
}
