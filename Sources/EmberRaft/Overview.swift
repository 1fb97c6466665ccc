// EmberRaft overview (documentation only).
//
// EmberRaft is Raft (Ongaro & Ousterhout; Ongaro's thesis) as a pure, deterministic state
// machine. It performs no I/O and reads no clock; the host owns storage, networking and time.
//
// Host loop (see Action.swift for the full contract):
//
//     var node = RaftNode(id: "n1", config: RaftConfig(randomSeed: seed), state: loadFromDisk())
//     for event in events {                    // .tick every N ms, .receive(msg), .propose(bytes), ...
//         for action in node.step(event) {
//             switch action {
//             case .persistHardState, .persistEntries, .persistSnapshot, .stageSnapshotChunk:
//                 buffer the write
//             case .send, .sendSnapshotChunk, .apply, .restoreSnapshot, .readReady:
//                 fsync buffered writes first (once), then send / apply / answer the read
//             case .prepareSnapshot:
//                 prepare an image of the state machine, answer with .snapshotReady
//             case .readFailed, .proposalAccepted, .proposalRejected:
//                 answer or track the client request
//             }
//         }
//     }
//
// Storage model: the node keeps its whole retained log (entries after the latest snapshot) in
// memory (`RaftLog`); the host persists what it is told and hands it back on restart as a
// `PersistentState`. To bound memory, the host periodically sends `.compact(index:)` for some
// applied index; the node drops that log prefix. The state machine is its own snapshot: Raft
// holds no snapshot bytes. For a follower behind the retained log the leader has the host
// prepare an image (`.prepareSnapshot` / `.snapshotReady`) and streams it in `snapshotChunkSize`
// chunks the host reads on demand (`.sendSnapshotChunk`), `maxInflightSnapshotChunks` in flight;
// the follower's host stages them (`.stageSnapshotChunk`) and installs them atomically.
//
// Features: PreVote, CheckQuorum with leader lease, conflict-term back-off hints, Figure-8 safe
// commit rule, pipelined + batched AppendEntries bounded by `maxEntriesPerMessage`,
// `maxBytesPerMessage` and `maxInflightMessages`, leader no-op on election, chunked
// InstallSnapshot, leadership transfer (TimeoutNow), single-server membership changes (effective
// when appended, one pending at a time), and ReadIndex linearizable reads (forwarded by followers).
//
// The seeded whole-cluster simulator (network and disk faults, crashes, a KV state machine,
// clients, invariant checks and a linearizability checker) is its own target, EmberRaftSim, so this
// library holds only the state machine: `Simulation.run(seed:nodeCount:)`.
