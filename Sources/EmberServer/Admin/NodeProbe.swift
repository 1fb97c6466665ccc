import EmberCore
import EmberRaft
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
        /// Leader only: committed entries the peer is not known to hold (commit − match), and
        /// how long that has been nonzero without the peer's match index advancing: a stuck
        /// follower shows a number that keeps growing (see `FollowerLag`).
        var commitLag: UInt64?
        var lagStalledSeconds: Double?
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
                var peer = peers[id, default: Peer(connected: false, queuedFrames: 0, droppedFrames: 0)]
                peer.lagEntries = s.lastIndex > p.matchIndex ? s.lastIndex - p.matchIndex : 0
                let lag = FollowerLag(p, commitIndex: s.commitIndex, tickMillis: r.config.tickMillis)
                peer.commitLag = lag.entries
                peer.lagStalledSeconds = lag.stalledSeconds
                peers[id] = peer
            }
        }
        return NodeProbe(clustered: true, id: s.id, role: s.role == .preCandidate ? "candidate" : s.role.rawValue,
                         leader: s.leaderID, term: s.term, commitIndex: s.commitIndex,
                         appliedIndex: r.local.appliedIndex, lastIndex: s.lastIndex, peers: peers, storage: metrics)
    }
}

/// One follower's lag as the leader sees it, for `/.ember/status` and `/metrics`.
struct FollowerLag {
    var entries: UInt64
    var stalledSeconds: Double

    init(_ p: PeerProgress, commitIndex: UInt64, tickMillis: Int) {
        entries = p.lag(commitIndex: commitIndex)
        stalledSeconds = Double(p.lagStalledTicks * tickMillis) / 1000
    }
}
