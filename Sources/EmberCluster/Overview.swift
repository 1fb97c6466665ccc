// The cluster runtime (documentation only).
//
//   client ─► REST / SSE / WebSocket front ─► ReplicatedDataStore ─► RaftHost ─► EmberStore (LMDB)
//                                                   │                    │
//                                                   │ reads, listeners   │ frames
//                                                   ▼                    ▼
//                                              local applied state   PeerTransport (mTLS 1.3)
//
// - ReplicatedDataStore: the `NodePorts` of a cluster node. Reads and listeners use the local
//   LMDB state (LMDBReads, LMDBCommitFeed); writes become Raft proposals; `linearizableBarrier` is ReadIndex.
// - RaftHost: the single serial driver of the `RaftNode` (see its header for the loop and the
//   persist-before-send order); RaftHost+Inputs maps inputs to Raft events; RequestBook tracks
//   client requests until the entry at their index is applied; RaftPersistence maps Raft entries
//   and snapshots onto the store's log and snapshot stream.
// - PeerTransport / PeerLink / PeerTLS / PeerFrame: the peer channel (one-way connections, a
//   listener plus one dialled link per peer), certificate identity checks and the frame codec.
// - ClusterConfiguration: every timing and limit, with defaults; parsed by emberd from flags or
//   a JSON config file.
//
// Failure model: a node crash loses nothing it acknowledged (entries and votes are fsynced before
// any message or reply depends on them); a storage error under Raft stops the node (fail-stop);
// client requests whose fate a node cannot know are answered 503 with that said.
