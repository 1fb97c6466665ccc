import EmberCore

@testable import EmberServer

/// A listen as a client's `q` names it (the session tests drive `RealtimeSession` directly).
func listen(_ path: Path, _ query: QuerySpec, _ queryWire: JSON?, _ tag: Int64?) -> RealtimeSession.Wire.ListenRequest {
    RealtimeSession.Wire.ListenRequest(path: path, queryWire: queryWire, tag: tag, query: query)
}

/// The listen joined the session and its initial read is next (not a duplicate, not one too many).
func started(_ ops: [RealtimeSession.Op]) -> Bool {
    guard ops.count == 1, case .readListen = ops[0] else { return false }
    return true
}
