// EmberNodeStore: the node's data port — `DataStore` (reads, queries, writes plain and
// pipelined, the commit feed, rules, onDisconnect; `ClusterControl` for the operations
// endpoints) — and its single-node implementation over LMDB (`LMDBDataStore`), with the
// identities and errors the fronts and the cluster runtime share.
//
// Must not: import network packages or know the client protocols (HTTP parsing, SSE, the wire
// protocol: EmberServer's), nor run Raft (EmberCluster's `ReplicatedDataStore` is the
// cluster's implementation of the same port).
