// EmberClient: the Swift client library for Ember (and Firebase Realtime Database servers
// speaking wire protocol v5), with the iOS SDK's Swift names plus async/await.
//
// Layers (one concept per file):
// - API/        public types: Database, DatabaseReference (a DatabaseQuery), DataSnapshot,
//               MutableData/TransactionResult, ServerValue, DataEventType, DatabaseError,
//               event streams (AsyncSequence). Immutable, Sendable; they only submit work.
// - Repo/       the Repo: owns the pure SyncTree (EmberSyncTree) on one serial queue, applies
//               local writes first, routes server data/acks, runs transactions and
//               onDisconnect bookkeeping, delivers callbacks on `Database.callbackQueue`.
// - Connection/ PersistentConnection (an actor): socket lifecycle, reconnect backoff, the node
//               list; it feeds EmberProtocol's `WireClientSession` (the pure state machine of
//               request numbers, listens restored with hashes, the ordered queue of
//               unacknowledged writes) and runs its effects. The socket is behind
//               `WireTransport` (HummingbirdWSClient in production, a fake in tests).
// - Wire/       the request envelope only; message parsing/encoding and frame splitting are
//               EmberProtocol's (pure, shared with emberd).
// - Codable/, Persistence/ (offline cache on SQLite), Legacy/ (Firebase 2.x names), Support/.
//
// Must not: import server code (only EmberCore, EmberSyncTree and EmberProtocol of this package).
//
// Value mapping (`DataSnapshot.value`): nil (no data), String, Bool, NSNumber (numbers; both
// `as? Int` and `as? Double` work), [String: Any], [Any] for array-like objects. Writes accept
// those plus any Swift integer/floating type, values boxed as AnyObject, NSNull and
// `ServerValue` placeholders.
