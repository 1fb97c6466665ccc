import EmberCore

/// What a client's WebSocket request names (`ws://HOST:PORT/.ws?v=5&ns=NS&ls=ID`, reference
/// §6.1): the protocol's endpoint, the namespace, and the session it replaces. The server's
/// rules for reading it; the socket and the upgrade are the driver's (`WireConnection`).
public struct WireConnectTarget: Sendable, Equatable {
    /// The longest `ls` value considered (emberd's session ids are 15 hex digits).
    public static let maxLastSessionBytes = 64

    /// `ns`, when it is a valid key; else the node's default namespace.
    public let namespace: String
    /// `ls`: the client's previous session on this server, when it can be one of ours (lowercase
    /// hex, at most `maxLastSessionBytes`); anything else is ignored.
    public let lastSession: String?

    /// The request target when it is the wire protocol's endpoint (`/.ws`, `/.ws?...`, `/.ws/...`).
    public static func endpoint(_ uri: Substring) -> Substring? {
        uri == "/.ws" || uri.hasPrefix("/.ws?") || uri.hasPrefix("/.ws/") ? uri : nil
    }

    /// Reads an endpoint's target (`endpoint`). The last `ns` and `ls` win; a query that does not
    /// decode is ignored.
    public init(target: Substring, defaultNamespace: String) {
        var namespace = defaultNamespace
        var last: String?
        if let q = target.firstIndex(of: "?"), let items = PercentDecoding.queryItems(target[target.index(after: q)...]) {
            for (k, v) in items where k == "ns" && Key.isValid(v) { namespace = v }
            if let v = items.last(where: { $0.0 == "ls" })?.1, !v.isEmpty, v.utf8.count <= Self.maxLastSessionBytes,
               v.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) {
                last = v
            }
        }
        self.namespace = namespace
        lastSession = last
    }
}
