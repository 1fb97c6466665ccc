// EmberProtocol: the parts of Firebase's REST and wire protocols that read input from outside —
// request URLs and query parameters (`RestRequest`), percent-decoding, the error shape, and the
// wire protocol's frame splitting and reassembly, and its typed messages in both directions
// (`WireServerMessage`, `WireClientMessage`), which emberd and EmberClient share, and the client
// side of a session as a sans-IO state machine (`WireClientSession`). Pure (no I/O, no network packages), so the fuzz
// harnesses build it alone; EmberServer re-exports it.
// Must not: do I/O or import network packages or server code.
