import EmberCore
import EmberRaft

/// What the health, readiness and metrics endpoints read off the store, without going through
/// `nodeStatus()` (which hashes the state): cheap enough for every scrape and probe.
struct NodeProbe: Sendable {
    typealias Peer = ClusterProbe.Peer

    var clustered: Bool
    var id: String
    var role: String
    var leader: String?
    var term: UInt64
    var commitIndex: UInt64
    var appliedIndex: UInt64
    var lastIndex: UInt64
    var peers: [String: Peer]
    var storage: StoreCounters?

    static func read(_ store: NodePorts) -> NodeProbe {
        let metrics = store.admin.storage?.counters
        guard let c = store.admin.cluster?.probe() else {
            let a = store.reader.appliedIndex
            return NodeProbe(clustered: false, id: "single", role: "leader", leader: "single", term: 0,
                             commitIndex: a, appliedIndex: a, lastIndex: a, peers: [:], storage: metrics)
        }
        return NodeProbe(clustered: true, id: c.id, role: c.role, leader: c.leader, term: c.term, commitIndex: c.commitIndex,
                         appliedIndex: c.appliedIndex, lastIndex: c.lastIndex, peers: c.peers, storage: metrics)
    }
}
