// EmberCluster: the cluster runtime — `RaftHost`, the single serial driver of EmberRaft's
// state machine over the LMDB store (persist before send, batched forwarding of client writes,
// snapshot transfer, membership); the mutual-TLS peer transport (`PeerTransport`, `PeerLink`,
// `PeerFrame`); and `ReplicatedDataStore`, the `NodePorts` the fronts use on a cluster member.
//
// Must not: speak the client protocols (REST, SSE, the wire protocol: EmberServer's) or decide
// Raft's rules itself (EmberRaft's `RaftNode` does; the host performs its actions under the
// HOST CONTRACT of EmberRaft/Action.swift).
