import EmberCore
@testable import EmberServer

/// The next `count` messages queued on a wire session, parsed (for tests that drive a
/// `RealtimeSession` without a socket).
func drain(_ session: RealtimeSession, _ count: Int) async -> [JSON] {
    var out: [JSON] = []
    for await frame in session.outbound {
        out.append(try! JSON.parse(frame))
        if out.count == count { break }
    }
    return out
}
