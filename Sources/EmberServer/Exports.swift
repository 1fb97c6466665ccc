// EmberServer: a node's fronts and their wiring (`EmberNode`) — REST (the byte-level and
// event-loop fast paths for plain writes, Hummingbird for the rest), SSE streams, the WebSocket
// wire protocol, the change feed and listener fan-out, auth and per-client limits, rules for
// reads, the operations endpoints, metrics and the console. ARCHITECTURE.md traces a write
// through it.
//
// Must not: import EmberStorage (the store is reached through EmberNodeStore's ports,
// `NodePorts`), write to LMDB or judge a write's rules or conditions itself (writes go through
// the write port and are judged when applied), nor block an event loop, the writer thread or the
// fan-out thread (long reads go to the `ReadPool`).

// The protocol parsers live in their own pure module (so they can be fuzzed without the network
// stack); the server's users see them as before.
@_exported import EmberProtocol
// The node's data port and the cluster runtime are modules of their own (issue 12); the server's
// users (emberd, tests) see them through EmberServer as before.
@_exported import EmberNodeStore
@_exported import EmberCluster
