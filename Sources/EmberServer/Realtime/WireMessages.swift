import EmberCore
import EmberProtocol

/// The server's names for server→client messages (`WireServerMessage`, shared with the client):
/// the JSON of each, and the status each kind of failure gets.
enum WireMessages {
    /// `nodes`: the client URLs of the cluster's members (`--client-urls`), sent as the Ember
    /// extension `en` (only when there are some) so a client given one URL learns where to go
    /// when its node dies. Firebase SDKs read `ts`, `v`, `h`, `s` and ignore other fields.
    static func hello(timestamp: Int64, host: String, session: String, nodes: [String] = []) -> JSON {
        WireServerMessage.hello(timestamp: timestamp, host: host, sessionID: session, nodes: nodes.isEmpty ? nil : nodes).json
    }

    static let pong: JSON = WireServerMessage.pong.json

    static func response(_ r: Int64, status: String, data: JSON) -> JSON {
        WireServerMessage.response(r: r, status: status, data: data).json
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
            let status = e.status == 403 ? "permission_denied" : e.status == 507 ? "insufficient_storage" : "invalid_data"
            return response(r, status: status, data: .string(e.message))
        default: return response(r, status: "internal_error", data: .string("\(error)"))
        }
    }

    /// A data push: `d` (overwrite) or `m` (merge), optionally tagged, with Ember's version.
    static func push(action: String, path: Path, data: JSON, tag: Int64?, version: UInt64?) -> JSON {
        precondition(action == "d" || action == "m", "a data push is d or m")
        return WireServerMessage.dataPush(path: path, data: data, isMerge: action == "m", tag: tag, version: version).json
    }

    static func listenRevoked(path: Path, query: JSON?) -> JSON {
        WireServerMessage.listenRevoked(path: path, query: query).json
    }

    /// `ac`: the credential is no longer valid; the client closes, refreshes its token and reconnects.
    static func authRevoked(status: String, reason: String) -> JSON {
        WireServerMessage.authRevoked(status: status, reason: reason).json
    }

    /// Paths on the wire have no leading slash (`a/b`; the root is "").
    static func wirePath(_ p: Path) -> String { p.wireText }
}
