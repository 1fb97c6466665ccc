import EmberCore
import EmberStorage

/// What the health, readiness and metrics endpoints read off the store, without going through
/// `nodeStatus()` (which hashes the state): cheap enough for every scrape and probe.
struct NodeProbe: Sendable {
    struct Peer: Sendable {
        var connected: Bool
        var queuedFrames: Int
        var droppedFrames: UInt64
        /// Leader only: entries this peer's log is behind the leader's last index.
        var lagEntries: UInt64?
    }

    var clustered: Bool
    var id: String
    var role: String
    var leader: String?
    var term: UInt64
    var commitIndex: UInt64
    var appliedIndex: UInt64
    var lastIndex: UInt64
    var peers: [String: Peer]
    var storage: StorageMetrics?

    /// The LMDB store under any of the node's `DataStore`s (nil for foreign test doubles).
    static func storage(of store: any DataStore) -> EmberStore? {
        switch store {
        case let s as MeteredDataStore: return storage(of: s.inner)
        case let s as LMDBDataStore: return s.storage
        case let s as ReplicatedDataStore: return s.local.storage
        default: return nil
        }
    }

    static func read(_ store: any DataStore) -> NodeProbe {
        let inner = MeteredDataStore.unwrap(store)
        let metrics = storage(of: inner)?.metrics
        guard let r = inner as? ReplicatedDataStore else {
            let a = inner.appliedIndex
            return NodeProbe(clustered: false, id: "single", role: "leader", leader: "single", term: 0,
                             commitIndex: a, appliedIndex: a, lastIndex: a, peers: [:], storage: metrics)
        }
        let s = r.host.status
        var peers: [String: Peer] = [:]
        for (id, l) in r.transport.linkStats() {
            peers[id] = Peer(connected: l.connected, queuedFrames: l.queued, droppedFrames: l.dropped, lagEntries: nil)
        }
        if s.role == .leader {
            for (id, p) in s.progress where id != s.id {
                peers[id, default: Peer(connected: false, queuedFrames: 0, droppedFrames: 0)].lagEntries =
                    s.lastIndex > p.matchIndex ? s.lastIndex - p.matchIndex : 0
            }
        }
        return NodeProbe(clustered: true, id: s.id, role: s.role == .preCandidate ? "candidate" : s.role.rawValue,
                         leader: s.leaderID, term: s.term, commitIndex: s.commitIndex,
                         appliedIndex: r.local.appliedIndex, lastIndex: s.lastIndex, peers: peers, storage: metrics)
    }
}
