// The protocol parsers live in their own pure module (so they can be fuzzed without the network
// stack); the server's users see them as before.
@_exported import EmberProtocol
