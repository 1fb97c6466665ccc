import EmberCore

/// Messages of the Firebase wire protocol v5 as the client sees them (reference §6.2–§6.5).
enum ServerMessage: Sendable, Equatable {
    /// Handshake: server time (ms), host, session id, and (Ember extension `en`) the client
    /// URLs of the cluster's nodes; nil when the server sent none (a single node, a node
    /// without `--client-urls`, or another Firebase server).
    case hello(timestamp: Int64, host: String, sessionID: String, nodes: [String]?)
    /// Response to request `r`.
    case response(r: Int64, status: String, data: JSON)
    /// Data push: overwrite (`d`) or merge (`m`) at `path`, optionally for a tagged query.
    case dataPush(path: Path, data: JSON, isMerge: Bool, tag: Int?)
    /// The server cancelled a listen (permission revoked).
    case listenRevoked(path: Path, query: JSON?)
    /// `ac`: the server revoked the credential (e.g. `expired_token`); reconnect with a fresh one.
    case authRevoked(status: String, reason: String)
    /// The server is shutting down this connection: stop reconnecting.
    case shutdown(String)
    /// Messages the client has no use for (pong, security debug, unknown).
    case ignored

    /// Parses one reassembled message; nil when it is not valid protocol JSON.
    static func parse(_ text: String) -> ServerMessage? {
        guard let json = try? JSON.parse(text), case .object(let envelope) = json,
              let t = envelope["t"]?.stringValue, case .object(let d)? = envelope["d"] else { return nil }
        if t == "c" {
            switch d["t"]?.stringValue {
            case "h":
                guard case .object(let h)? = d["d"] else { return nil }
                let ts: Int64
                switch h["ts"] {
                case .int(let i)?: ts = i
                case .double(let x)?: ts = Int64(x)
                default: ts = 0
                }
                // Non-strings are skipped; `NodeList` bounds and checks the rest.
                var nodes: [String]? = nil
                if case .array(let list)? = h["en"] { nodes = list.compactMap(\.stringValue) }
                return .hello(timestamp: ts, host: h["h"]?.stringValue ?? "", sessionID: h["s"]?.stringValue ?? "", nodes: nodes)
            case "s": return .shutdown(d["d"]?.stringValue ?? "")
            default: return .ignored
            }
        }
        guard t == "d" else { return .ignored }
        if case .int(let r)? = d["r"] {
            let b = d["b"]?.objectValue ?? [:]
            return .response(r: r, status: b["s"]?.stringValue ?? "", data: b["d"] ?? .null)
        }
        guard let action = d["a"]?.stringValue, case .object(let b)? = d["b"] else { return .ignored }
        switch action {
        case "d", "m":
            guard let p = b["p"]?.stringValue, let path = try? Path(p) else { return .ignored }
            var tag: Int? = nil
            if case .int(let t)? = b["t"] { tag = Int(t) }
            return .dataPush(path: path, data: b["d"] ?? .null, isMerge: action == "m", tag: tag)
        case "c":
            guard let p = b["p"]?.stringValue, let path = try? Path(p) else { return .ignored }
            return .listenRevoked(path: path, query: b["q"])
        case "ac":
            return .authRevoked(status: b["s"]?.stringValue ?? "", reason: b["d"]?.stringValue ?? "")
        default:
            return .ignored
        }
    }
}

/// Builders for client → server messages.
enum ClientMessage {
    /// Paths on the wire have no leading slash; the root is "".
    static func wirePath(_ p: Path) -> String { p.segments.joined(separator: "/") }

    static func request(_ r: Int64, action: String, body: [String: JSON]) -> String {
        JSON.object(["t": .string("d"), "d": .object(["r": .int(r), "a": .string(action), "b": .object(body)])]).serialized()
    }

    static let ping = JSON.object(["t": .string("c"), "d": .object(["t": .string("p"), "d": .object([:])])]).serialized()
}
