// EmberNodeStore: the node's store as its fronts see it — one port per role (`Ports.swift`:
// `ReadPort` reads and queries, `WritePort` plain and pipelined writes, `CommitFeedPort` the
// change sets for listener fan-out, `RulesPort`, `OnDisconnectPort`; `AdminPorts.swift`: status,
// storage figures, defrag, backup; `ClusterControl` for cluster admin), bundled per node in
// `NodePorts`, with their own value types (`StoreValues.swift`, `OnDisconnectValues.swift`)
// — and their single-node implementation over LMDB (`LMDBDataStore` builds the ports from
// `LMDBReads`, `LMDBWrites`, `LMDBCommitFeed`, `LMDBRules`, `LMDBOnDisconnect`, `LMDBAdmin`),
// with the identities and errors the fronts and the cluster runtime share.
//
// Must not: hand EmberStorage's types to the fronts through a port (`LMDBTranslation` converts
// at the edge), import network packages or know the client protocols (HTTP, ETags, SSE, the
// wire protocol: EmberServer's), nor run Raft (EmberCluster's `ReplicatedDataStore` builds the
// same ports over the same LMDB read, feed, rules and admin implementations, its writes
// proposed through Raft).
