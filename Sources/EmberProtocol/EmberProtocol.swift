// EmberProtocol: the parts of Firebase's REST and wire protocols that read input from outside —
// request URLs and query parameters (`RestRequest`), percent-decoding, the error shape, and the
// wire protocol's frame splitting and reassembly, and its typed messages in both directions
// (`WireServerMessage`, `WireClientMessage`), which emberd and EmberClient share, and the client
// side of a session as a sans-IO state machine (`WireClientSession`). The server's side as sans-IO
// machines its drivers (EmberServer's `RealtimeSession`, `RealtimeHandler`, `WireConnection`) feed:
// the session's rules (`WireServerSession`), the order of write answers (`WireAckQueue`) and of
// requests around pipelined writes (`WireRequestRoute`), the inbound queue and its backpressure
// (`WireRequestQueue`), the request budget (`WireRequestBudget`, `TokenBucket`), a write's body
// (`WireWrite`, `WriteValidation`), the outbound backpressure (`WireOutbound`) and the WebSocket
// frames' rules (`WebSocketInbound`; `WebSocketClientFrame` and `WebSocketFrameHeader` for the
// test and load clients that write and read frames themselves, `WebSocketUpgrade`). Pure (no
// I/O, no network packages), so the fuzz harnesses build it alone; EmberServer re-exports it.
// Must not: do I/O or import network packages or server code.
