import EmberCore

/// Builders for server→client messages of the wire protocol (reference §6.2–§6.5).
enum WireMessages {
    /// `nodes`: the client URLs of the cluster's members (`--client-urls`), sent as the Ember
    /// extension `en` (only when there are some) so a client given one URL learns where to go
    /// when its node dies. Firebase SDKs read `ts`, `v`, `h`, `s` and ignore other fields.
    static func hello(timestamp: Int64, host: String, session: String, nodes: [String] = []) -> JSON {
        var d: [String: JSON] = ["ts": .int(timestamp), "v": .string("5"), "h": .string(host), "s": .string(session)]
        if !nodes.isEmpty { d["en"] = .array(nodes.map { .string($0) }) }
        return .object(["t": .string("c"), "d": .object(["t": .string("h"), "d": .object(d)])])
    }

    static let pong: JSON = .object(["t": .string("c"), "d": .object(["t": .string("o"), "d": .object([:])])])

    static func response(_ r: Int64, status: String, data: JSON) -> JSON {
        .object(["t": .string("d"), "d": .object(["r": .int(r), "b": .object(["s": .string(status), "d": data])])])
    }

    /// The response `{"s":"ok","d":""}` to request `r` as a frame, without building a JSON value
    /// (every acknowledged write gets one).
    static func okFrame(_ r: Int64) -> String {
        #"{"t":"d","d":{"r":"# + String(r) + #","b":{"s":"ok","d":""}}}"#
    }

    /// The response to a request that failed with `error` (status by error kind).
    static func errorResponse(_ r: Int64, _ error: any Error) -> JSON {
        switch error {
        case let e as EmberError: return response(r, status: "invalid_data", data: .string(e.description))
        case let e as RestError:
            return response(r, status: e.status == 429 ? "too_many_requests" : "invalid_data", data: .string(e.message))
        case let e as StoreUnavailable: return response(r, status: "unavailable", data: .string(e.message))
        case is PermissionDenied: return response(r, status: "permission_denied", data: .string(PermissionDenied.message))
        case let e as StoreRefusal:
            return response(r, status: e.status == 403 ? "permission_denied" : "invalid_data", data: .string(e.message))
        default: return response(r, status: "internal_error", data: .string("\(error)"))
        }
    }

    /// A data push: `d` (overwrite) or `m` (merge), optionally tagged, with Ember's version.
    static func push(action: String, path: Path, data: JSON, tag: Int64?, version: UInt64?) -> JSON {
        var body: [String: JSON] = ["p": .string(wirePath(path)), "d": data]
        if let tag { body["t"] = .int(tag) }
        if let version { body["v"] = .int(Int64(clamping: version)) }
        return .object(["t": .string("d"), "d": .object(["a": .string(action), "b": .object(body)])])
    }

    static func listenRevoked(path: Path, query: JSON?) -> JSON {
        var body: [String: JSON] = ["p": .string(wirePath(path))]
        if let query { body["q"] = query }
        return .object(["t": .string("d"), "d": .object(["a": .string("c"), "b": .object(body)])])
    }

    /// `ac`: the credential is no longer valid; the client closes, refreshes its token and reconnects.
    static func authRevoked(status: String, reason: String) -> JSON {
        .object(["t": .string("d"), "d": .object(["a": .string("ac"), "b": .object(["s": .string(status), "d": .string(reason)])])])
    }

    /// Paths on the wire have no leading slash (`a/b`; the root is "").
    static func wirePath(_ p: Path) -> String { p.segments.joined(separator: "/") }
}
