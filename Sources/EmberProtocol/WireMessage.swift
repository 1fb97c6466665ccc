import EmberCore

extension Path {
    /// The path as the wire protocol writes it: no leading slash (`a/b`); the root is "".
    public var wireText: String { segments.joined(separator: "/") }
}

/// Server → client messages of the wire protocol v5 (reference §6.2–§6.5), typed: emberd encodes
/// them, EmberClient parses them, one definition for both ends.
public enum WireServerMessage: Sendable, Equatable {
    /// Handshake (`c`/`h`): server time (ms), host, session id, and (Ember extension `en`) the
    /// client URLs of the cluster's nodes; nil/empty when there are none.
    case hello(timestamp: Int64, host: String, sessionID: String, nodes: [String]?)
    /// `c`/`o`: answer to a client's ping.
    case pong
    /// `c`/`s`: the server ends the connection for good (the client stops reconnecting).
    case shutdown(String)
    /// `c`/`e`: the client sent something that is not a protocol message.
    case protocolError(String)
    /// Response to request `r`.
    case response(r: Int64, status: String, data: JSON)
    /// Data push: overwrite (`d`) or merge (`m`) at `path`, optionally for a tagged query, with
    /// Ember's version of the location (`v`).
    case dataPush(path: Path, data: JSON, isMerge: Bool, tag: Int64?, version: UInt64?)
    /// `c`: the server cancelled a listen (permission revoked).
    case listenRevoked(path: Path, query: JSON?)
    /// `ac`: the server revoked the credential (e.g. `expired_token`).
    case authRevoked(status: String, reason: String)
    /// Parsed only: a well-formed message this side has no use for (security debug, unknown).
    case ignored

    public var json: JSON {
        switch self {
        case .hello(let timestamp, let host, let session, let nodes):
            // Firebase SDKs read `ts`, `v`, `h`, `s` and ignore other fields.
            var d: KeyMap<JSON> = ["ts": .int(timestamp), "v": .string("5"), "h": .string(host), "s": .string(session)]
            if let nodes { d["en"] = .array(nodes.map { .string($0) }) }
            return Self.control("h", .object(d))
        case .pong: return Self.control("o", .object([:]))
        case .shutdown(let reason): return Self.control("s", .string(reason))
        case .protocolError(let why): return Self.control("e", .string(why))
        case .response(let r, let status, let data):
            return .object(["t": .string("d"), "d": .object(["r": .int(r), "b": .object(["s": .string(status), "d": data])])])
        case .dataPush(let path, let data, let isMerge, let tag, let version):
            var body: KeyMap<JSON> = ["p": .string(path.wireText), "d": data]
            if let tag { body["t"] = .int(tag) }
            if let version { body["v"] = .int(Int64(clamping: version)) }
            return Self.action(isMerge ? "m" : "d", body)
        case .listenRevoked(let path, let query):
            var body: KeyMap<JSON> = ["p": .string(path.wireText)]
            if let query { body["q"] = query }
            return Self.action("c", body)
        case .authRevoked(let status, let reason):
            return Self.action("ac", ["s": .string(status), "d": .string(reason)])
        case .ignored:
            preconditionFailure("`ignored` is what a parser returns, never a message to send")
        }
    }

    public var text: String { json.serialized() }

    private static func control(_ t: String, _ d: JSON) -> JSON {
        .object(["t": .string("c"), "d": .object(["t": .string(t), "d": d])])
    }

    private static func action(_ a: String, _ body: KeyMap<JSON>) -> JSON {
        .object(["t": .string("d"), "d": .object(["a": .string(a), "b": .object(body)])])
    }

    /// Parses one reassembled message; nil when it is not protocol JSON (`{"t": …, "d": {…}}`).
    public static func parse(_ text: String) -> WireServerMessage? {
        guard let json = try? JSON.parse(text), case .object(let envelope) = json,
              let t = envelope["t"]?.stringValue, case .object(let d)? = envelope["d"] else { return nil }
        if t == "c" {
            switch d["t"]?.stringValue {
            case "h":
                guard case .object(let h)? = d["d"] else { return nil }
                let ts: Int64
                switch h["ts"] {
                case .int(let i)?: ts = i
                case .double(let x)? where x.isFinite && abs(x) < 9e18: ts = Int64(x)
                default: ts = 0
                }
                // Non-strings are skipped; the client's `NodeList` bounds and checks the rest.
                var nodes: [String]? = nil
                if case .array(let list)? = h["en"] { nodes = list.compactMap(\.stringValue) }
                return .hello(timestamp: ts, host: h["h"]?.stringValue ?? "", sessionID: h["s"]?.stringValue ?? "", nodes: nodes)
            case "o": return .pong
            case "s": return .shutdown(d["d"]?.stringValue ?? "")
            case "e": return .protocolError(d["d"]?.stringValue ?? "")
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
            var tag: Int64? = nil
            if case .int(let t)? = b["t"] { tag = t }
            var version: UInt64? = nil
            if case .int(let v)? = b["v"], v >= 0 { version = UInt64(v) }
            return .dataPush(path: path, data: b["d"] ?? .null, isMerge: action == "m", tag: tag, version: version)
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

/// Client → server messages: requests (`d` with `r`, `a`, `b`) and control messages (`c`).
public enum WireClientMessage: Sendable, Equatable {
    /// Request `r`: `action` (`q`, `n`, `p`, `m`, `g`, `o`, `om`, `oc`, `auth`, …) with its body.
    case request(r: Int64, action: String, body: KeyMap<JSON>)
    /// `c`/`p`: keep-alive; the server answers `pong`.
    case ping
    /// Parsed only: a control message the server has no use for.
    case ignored

    /// A request body's `p` as a path (no leading slash on the wire; either is accepted).
    public static func path(of b: KeyMap<JSON>) throws(EmberError) -> Path {
        guard let p = b["p"]?.stringValue else { throw EmberError.invalidData("request needs a path p") }
        return try Path(p)
    }

    public var json: JSON {
        switch self {
        case .request(let r, let action, let body):
            return .object(["t": .string("d"), "d": .object(["r": .int(r), "a": .string(action), "b": .object(body)])])
        case .ping:
            return .object(["t": .string("c"), "d": .object(["t": .string("p"), "d": .object([:])])])
        case .ignored:
            preconditionFailure("`ignored` is what a parser returns, never a message to send")
        }
    }

    public var text: String { json.serialized() }

    /// Why a message from a client is not a request the server can answer.
    public enum ParseError: Error, Equatable {
        /// Not `{"t": …, "d": {…}}`: answered with a protocol error.
        case notProtocol
        /// A `d` message without a numeric `r` or a string `a`.
        case missingRequestFields
    }

    public static func parse(_ text: String) -> Result<WireClientMessage, ParseError> {
        // Member by member (`JSONMembers`), not through `JSON.parse`: the envelope's and `d`'s
        // dictionaries would be built, hashed and looked up once per request only to read these
        // few keys. Same answers as reading the parsed document: a repeated key keeps its last
        // value, and anything `JSON.parse` refuses is `.notProtocol`.
        var envelopeType: JSON? = nil
        var d: DMembers? = nil  // nil: no `d` member, or one that is not an object
        var m = JSONMembers(text)
        do {
            guard try m.enterObject() else { return .failure(.notProtocol) }
            while let key = try m.nextKey() {
                switch key {
                case "t": envelopeType = try m.value()
                case "d": d = try DMembers.read(&m)
                default: _ = try m.value()
                }
            }
            try m.finish()
        } catch {
            return .failure(.notProtocol)
        }
        guard let d else { return .failure(.notProtocol) }
        if envelopeType?.stringValue == "c" {
            return .success(d.t?.stringValue == "p" ? .ping : .ignored)
        }
        guard case .int(let r)? = d.r, let action = d.a?.stringValue else { return .failure(.missingRequestFields) }
        return .success(.request(r: r, action: action, body: d.b?.objectValue ?? [:]))
    }

    /// The members of a message's `d` object that `parse` reads.
    private struct DMembers {
        var r: JSON?, a: JSON?, b: JSON?, t: JSON?

        /// Reads the value at the cursor: its members if it is an object, nil (consumed) if not.
        static func read(_ m: inout JSONMembers) throws(EmberError) -> DMembers? {
            guard try m.enterObject() else {
                _ = try m.value()
                return nil
            }
            var d = DMembers()
            while let k = try m.nextKey() {
                switch k {
                case "r": d.r = try m.value()
                case "a": d.a = try m.value()
                case "b": d.b = try m.value()
                case "t": d.t = try m.value()
                default: _ = try m.value()
                }
            }
            return d
        }
    }
}
