import EmberCore
@testable import EmberCluster
@testable import EmberNodeStore
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

/// A wire-protocol request frame: `{"t":"d","d":{"r":r,"a":action,"b":body}}`.
func wireRequest(_ r: Int, _ action: String, _ body: String) -> String {
    #"{"t":"d","d":{"r":\#(r),"a":"\#(action)","b":\#(body)}}"#
}

/// A response frame's request number, status and data (nil for other messages).
func wireResponse(_ m: JSON) -> (r: Int64, status: String, data: JSON)? {
    guard case .int(let r)? = m.objectValue?["d"]?.objectValue?["r"],
          let b = m.objectValue?["d"]?.objectValue?["b"]?.objectValue, let s = b["s"]?.stringValue else { return nil }
    return (r, s, b["d"] ?? .null)
}
