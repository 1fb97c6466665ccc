import EmberCore
import EmberStorage
import Foundation
import Logging
import Testing
import EmberTestSupport

@testable import EmberCluster
@testable import EmberNodeStore

/// A member of 0.6.0 (peer level 3) must never be sent a triggers `advance` entry (it stops on
/// the first one): three members over real mutual TLS log `advance` entries at level 4; a
/// follower is stopped, its directory wiped, and it starts again offering only 0.6.0's levels
/// (a node downgraded to 0.6.0). The leader's log still holds the `advance` entries from index 1,
/// so the member is sent a snapshot past the last of them instead: it catches up, holds the
/// same state, and its log (Raft's and the store's) starts after the last `advance` entry; the
/// snapshot it is sent carries trigger state in 0.6.0's layout (`TriggerLegacyLayout`).
@Suite(.serialized) struct TriggerAdvanceCatchUpTests {
    static let doc = #"{"a": {"path": "/m/{id}", "on": ["created"], "url": "http://127.0.0.1:9/h", "secret": "0123456789abcdef"}}"#

    static func isAdvance(_ e: EmberStorage.LogEntry) -> Bool {
        if case .triggers(.advance) = e.operation { return true }
        return false
    }

    /// Every entry of a member's stored log, from its first index.
    /// Waits (up to 60 s) until `a` and `b` read the same applied index, then expects their state
    /// hashes there equal: a trigger worker may log entries meanwhile, so compare only once both
    /// stand at one index.
    static func expectSameState(_ a: ReplicatedDataStore, _ b: ReplicatedDataStore) async throws {
        var same = false
        let deadline = ContinuousClock.now + .seconds(60)
        while !same && ContinuousClock.now < deadline {
            let (ia, ha) = try a.local.storage.stateHashAtApplied()
            let (ib, hb) = try b.local.storage.stateHashAtApplied()
            if ia == ib { #expect(ha == hb); same = true } else { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(same)
    }

    /// Waits (up to 60 s) until `n`'s published Raft status shows a snapshot at or past `index`.
    /// The host publishes its status at the end of a turn, after the store may already have
    /// applied what followed the snapshot: a test waits for the status, not only the store.
    static func awaitSnapshotStatus(_ n: ReplicatedDataStore, atLeast index: UInt64) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while n.host.status.snapshotIndex < index && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    static func storedLog(_ n: ReplicatedDataStore) throws -> [EmberStorage.LogEntry] {
        let store = n.local.storage
        var out: [EmberStorage.LogEntry] = []
        var from = store.firstLogIndex
        while true {
            let page = try store.entries(from: from, maxCount: 1_000)
            out += page
            guard let last = page.last, page.count == 1_000 else { return out }
            from = last.index + 1
        }
    }

    /// The meta rows (tag 5) of a snapshot file: `[u32 BE length][chunk]...`, each chunk records
    /// `[tag][varint key length][key][varint value length][value]`; nil if malformed.
    static func metaRows(ofSnapshotFile f: [UInt8]) -> [[UInt8]: [UInt8]]? {
        var out: [[UInt8]: [UInt8]] = [:]
        var i = 0
        func varint(_ end: Int) -> Int? {
            var n = 0, shift = 0
            while i < end {
                let b = f[i]; i += 1
                n |= Int(b & 0x7F) << shift
                if b < 0x80 { return n }
                shift += 7
            }
            return nil
        }
        while i + 4 <= f.count {
            let n = f[i..<i + 4].reduce(0) { ($0 << 8) | Int($1) }
            i += 4
            let end = i + n
            guard end <= f.count else { return nil }
            while i < end {
                let tag = f[i]; i += 1
                guard let kn = varint(end), i + kn <= end else { return nil }
                let k = Array(f[i..<i + kn]); i += kn
                guard let vn = varint(end), i + vn <= end else { return nil }
                if tag == 5 { out[k] = Array(f[i..<i + vn]) }
                i += vn
            }
        }
        return i == f.count ? out : nil
    }

    @Test(.enabled(if: ReplicatedDataStoreTests.openssl != nil)) func wipedLevel3MemberGetsASnapshotPastTheLastAdvance() async throws {
        let c = try await LevelledTLSCluster("advance-catchup", ids: ["n1", "n2", "n3"])
        for id in c.ids { c.nodes.append(try await c.open(id, PeerTLS.offered)) }
        try await c.run {
        var leader = try await c.settledLeader()
        var port = try #require(leader.ports.triggers)
        #expect(port.logsAdvance)
        try await port.log(namespace: "t", .define(text: Self.doc))
        let group = try #require(try port.definitions(namespace: "t").definitions.first?.group)
        var last: UInt64 = 0
        for i in 0..<3 {
            last = try await leader.write(WriteRequest(namespace: "t", path: try Path("m/k\(i)"), kind: .set(.int(Int64(i))), identity: .admin)).index
            try await port.log(namespace: "t", .advance([TriggerCursor(name: "a", group: group, through: last, rows: [])]))
        }

        // A follower goes down; one more advance entry is logged meanwhile (its last connection
        // showed level 4), then it comes back wiped, offering what 0.6.0 offers.
        let f = try #require(c.nodes.firstIndex { $0.config.nodeID != leader.config.nodeID })
        let fid = c.nodes[f].config.nodeID
        await c.nodes[f].shutdown()
        try FileManager.default.removeItem(atPath: "\(c.dir)/\(fid)")
        last = try await leader.write(WriteRequest(namespace: "t", path: try Path("m/k3"), kind: .set(.int(3)), identity: .admin)).index
        try await port.log(namespace: "t", .advance([TriggerCursor(name: "a", group: group, through: last, rows: [])]))
        let leaderLog = try Self.storedLog(leader)
        let lastAdvance = try #require(leaderLog.filter(Self.isAdvance).last?.index)
        #expect(leader.local.storage.firstLogIndex == 1, "the leader's log still holds every advance entry")
        #expect(leader.host.status.snapshotIndex < lastAdvance)

        c.nodes[f] = try await c.open(fid, [PeerTLS.protocolLevel3, PeerTLS.protocolLevel2])
        let wiped = c.nodes[f]
        leader = try await c.settledLeader()
        port = try #require(leader.ports.triggers)

        // It catches up to a write made after it came back.
        let after = try await leader.write(WriteRequest(namespace: "t", path: try Path("m/k4"), kind: .set(.int(4)), identity: .admin)).index
        let deadline = ContinuousClock.now + .seconds(60)
        while wiped.appliedIndex < after && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(wiped.appliedIndex >= after)
        #expect(!port.logsAdvance, "a member at level 3: cursors go as settle entries")

        // The same state as the leader's at the same applied index (the trigger worker may log
        // entries meanwhile: compare once both read the same index).
        try await Self.expectSameState(leader, wiped)
        #expect(try wiped.ports.triggers?.state(namespace: "t", trigger: "a")?.cursor
                == (try leader.ports.triggers?.state(namespace: "t", trigger: "a")?.cursor))

        // It was never sent an advance entry: it installed a snapshot at or past the last one, and
        // its logs start after it (without the gate it replicated the leader's log from index 1).
        try await Self.awaitSnapshotStatus(wiped, atLeast: lastAdvance)
        #expect(wiped.host.status.snapshotIndex >= lastAdvance)
        #expect(wiped.local.storage.firstLogIndex > lastAdvance)
        #expect(!(try Self.storedLog(wiped)).contains(where: Self.isAdvance))
        // What it was sent carries trigger state in 0.6.0's layout: a format-1 state, no shared
        // change records (0.6.0 stops applying at a format-2 state).
        let file = try #require(FileManager.default.contents(atPath: leader.local.storage.directory + "/raft-snapshot-outgoing"))
        let rows = try #require(Self.metaRows(ofSnapshotFile: [UInt8](file)))
        #expect(rows[Array("triggers/s/t".utf8) + [0] + Array("a".utf8)]?.first == 1)
        #expect(!rows.keys.contains { $0.starts(with: Array("triggers/r/".utf8)) })
        }
    }
}
