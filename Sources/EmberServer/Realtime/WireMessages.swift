import EmberCore
import EmberProtocol

/// The server's names for server→client messages (`WireServerMessage`, shared with the client),
/// and the kind of failure (`WireFailure`, whose status the protocol fixes) each error is.
enum WireMessages {
    /// `nodes`: the client URLs of the cluster's members (`--client-urls`), sent as the Ember
    /// extension `en` (only when there are some) so a client given one URL learns where to go
    /// when its node dies. Firebase SDKs read `ts`, `v`, `h`, `s` and ignore other fields.
    static func hello(timestamp: Int64, host: String, session: String, nodes: [String] = []) -> JSON {
        WireServerSession<EmberWire>.hello(timestamp: timestamp, host: host, sessionID: session, nodes: nodes)
    }

    static func response(_ r: Int64, status: String, data: JSON) -> JSON {
        WireServerMessage.response(r: r, status: status, data: data).json
    }

    /// The kind of failure an error is, as the protocol answers it (`WireFailure`).
    static func failure(_ error: any Error) -> WireFailure {
        switch error {
        case let f as WireFailure: return f
        case let e as EmberError: return .invalidData(e.description)
        case let e as RestError: return e.status == 429 ? .tooManyRequests(e.message) : .invalidData(e.message)
        case let e as StoreUnavailable: return .unavailable(e.message)
        case is PermissionDenied: return .permissionDenied(PermissionDenied.message)
        case let e as StoreRefusal:
            switch e.status {
            case 403: return .permissionDenied(e.message)
            case 507: return .insufficientStorage(e.message)
            default: return .invalidData(e.message)
            }
        default: return .internalError("\(error)")
        }
    }

    /// A data push: `d` (overwrite) or `m` (merge), optionally tagged, with Ember's version.
    static func push(action: String, path: Path, data: JSON, tag: Int64?, version: UInt64?) -> JSON {
        precondition(action == "d" || action == "m", "a data push is d or m")
        return WireServerMessage.dataPush(path: path, data: data, isMerge: action == "m", tag: tag, version: version).json
    }
}
