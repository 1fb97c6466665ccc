// The protocol parsers live in their own pure module (so they can be fuzzed without the network
// stack); the server's users see them as before.
@_exported import EmberProtocol
// The node's data port and the cluster runtime are modules of their own (issue 12); the server's
// users (emberd, tests) see them through EmberServer as before.
@_exported import EmberNodeStore
@_exported import EmberCluster
