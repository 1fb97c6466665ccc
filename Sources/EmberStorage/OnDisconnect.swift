import EmberCore
import Foundation

/// A client connection that registered onDisconnect writes, as the replicated state names it:
/// the node it is connected to, that node's incarnation (a token picked at each start), and the
/// connection's id.
public struct OnDisconnectSession: Sendable, Hashable, CustomStringConvertible {
    public var node: String
    public var incarnation: String
    public var id: String

    public init(node: String, incarnation: String, id: String) {
        self.node = node
        self.incarnation = incarnation
        self.id = id
    }

    public var description: String { "\(node)/\(incarnation)/\(id)" }

    /// Named limit: bytes of a node id, incarnation or session id (node ids are at most 63).
    public static let maxNameBytes = 64

    /// 1–64 characters of A–Z a–z 0–9 - _ . (node ids, UUIDs, hex tokens).
    public static func isValidName(_ s: String) -> Bool {
        let u = s.utf8
        return !u.isEmpty && u.count <= maxNameBytes && u.allSatisfy { b in
            (b >= 48 && b <= 57) || (b >= 65 && b <= 90) || (b >= 97 && b <= 122) || b == 45 || b == 95 || b == 46
        }
    }

    func encode(into w: inout ByteWriter) {
        w.string(node); w.string(incarnation); w.string(id)
    }

    init(decoding r: inout ByteReader) throws(StorageError) {
        node = try r.string(); incarnation = try r.string(); id = try r.string()
    }
}

/// onDisconnect bookkeeping carried by the log (`WriteOperation.onDisconnect`), so every replica
/// knows each session's pending writes and which incarnation of each node still holds its
/// sessions. The entry's namespace is the session's (for `holder` and `seal`: any).
///
/// Lifecycle: a node logs `holder` when it starts; its sessions `register` writes (with the
/// writer's auth, judged by the rules when they run) and `cancel` them; a clean disconnect logs
/// `run`. When the node dies or is cut off past the lease, the leader logs `seal`, and then `run`
/// for each session of an incarnation that is no longer its node's holder (an orphan). A
/// session's writes are deleted when they run, so they run at most once, whoever logs the `run`.
public enum OnDisconnectOperation: Sendable, Equatable {
    /// `node` started as `incarnation`: from now on only that incarnation's sessions may register.
    case holder(node: String, incarnation: String)
    /// The leader found `node` unresponsive past the lease: if `incarnation` still holds its
    /// sessions, it stops holding them (they become orphans and take no new registrations).
    case seal(node: String, incarnation: String)
    /// A session's write (`.set` or `.update`, no condition) to run when it ends. Fails its
    /// condition (nothing stored) unless the session's incarnation holds its node's sessions.
    case register(session: OnDisconnectSession, write: WriteOperation)
    /// `oc`: drops the session's writes at or below `path` (Firebase's cancel, `OnDisconnectCancel`).
    case cancel(session: OnDisconnectSession, path: Path)
    /// The session ended, or was orphaned: its writes run now, in registration order, and are
    /// deleted.
    case run(session: OnDisconnectSession)

    func encode(into w: inout ByteWriter) {
        switch self {
        case .holder(let node, let inc): w.u8(0); w.string(node); w.string(inc)
        case .seal(let node, let inc): w.u8(1); w.string(node); w.string(inc)
        case .register(let s, let write): w.u8(2); s.encode(into: &w); LogEntry.encode(write, into: &w)
        case .cancel(let s, let path): w.u8(3); s.encode(into: &w); w.string(path.description)
        case .run(let s): w.u8(4); s.encode(into: &w)
        }
    }

    init(decoding r: inout ByteReader, limit: Int) throws(StorageError) {
        switch try r.u8() {
        case 0: self = .holder(node: try r.string(), incarnation: try r.string())
        case 1: self = .seal(node: try r.string(), incarnation: try r.string())
        case 2:
            let s = try OnDisconnectSession(decoding: &r)
            let write = try LogEntry.decodeOperation(&r, limit: limit, nested: true)
            guard Self.isRegistrable(write) else { throw .corrupt("onDisconnect write") }
            self = .register(session: s, write: write)
        case 3:
            let s = try OnDisconnectSession(decoding: &r)
            self = .cancel(session: s, path: try r.path())
        case 4: self = .run(session: try OnDisconnectSession(decoding: &r))
        default: throw .corrupt("onDisconnect operation")
        }
    }

    /// Only unconditional sets and updates may be registered.
    static func isRegistrable(_ write: WriteOperation) -> Bool {
        switch write {
        case .set(_, _, nil), .update(_, _, nil): return true
        default: return false
        }
    }

    /// The names it carries (checked before an entry is logged: they become tree keys).
    var names: [String] {
        switch self {
        case .holder(let node, let inc), .seal(let node, let inc): return [node, inc]
        case .register(let s, _), .cancel(let s, _), .run(let s): return [s.node, s.incarnation, s.id]
        }
    }
}

/// Where the replicated state keeps onDisconnect bookkeeping: the tree of a reserved namespace
/// (so snapshots and state hashes carry it like any data; clients cannot reach it):
///
/// * `/holders/<node>`: the incarnation that holds the node's sessions;
/// * `/sessions/<node>/<incarnation>/<namespace>/<session>/<index>`: one registered write, as
///   text (`storedWrite`), keyed by its registration's log index (20 digits: key order is
///   registration order).
///
/// Node ids may hold '.', which keys may not: it is stored as ':' (never part of a node id).
public enum OnDisconnectTable {
    public static let namespace = "_ember_ondisconnect"
    public static let holders = Path(validated: ["holders"])
    public static let sessions = Path(validated: ["sessions"])

    public static func nodeKey(_ node: String) -> String { node.replacingOccurrences(of: ".", with: ":") }
    public static func node(fromKey key: String) -> String { key.replacingOccurrences(of: ":", with: ".") }

    static func holderPath(_ node: String) -> Path { holders.child(nodeKey(node)) }

    public static func sessionPath(_ s: OnDisconnectSession, namespace: String) -> Path {
        Path(validated: ["sessions", nodeKey(s.node), s.incarnation, namespace, s.id])
    }

    static func writeKey(_ index: UInt64) -> String {
        let digits = String(index)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits
    }

    /// A registered write as stored: the log encoding of an entry carrying the write, its
    /// namespace and its writer's auth, in base64 (exact on every replica, unlike JSON text).
    static func storedWrite(namespace: String, _ write: WriteOperation, auth: WriteAuth) -> String {
        let entry = LogEntry(index: 0, term: 0, namespace: namespace, operation: write, timestamp: 0, auth: auth)
        return Data(entry.encoded()).base64EncodedString()
    }

    public static func decodeStoredWrite(_ node: Node) throws(StorageError) -> LogEntry {
        guard case .string(let text)? = node.leaf, let data = Data(base64Encoded: text) else {
            throw .corrupt("stored onDisconnect write")
        }
        let entry = try LogEntry(decoding: Array(data))
        guard OnDisconnectOperation.isRegistrable(entry.operation) else { throw .corrupt("stored onDisconnect write") }
        return entry
    }
}

/// `oc` (cancel onDisconnect at a location) with Firebase's semantics: every queued write at or
/// below the location is dropped, and so is that part of writes queued above it. A set above the
/// location is split into sets of its children (JS `sparseSnapshotTreeForget`), so its other
/// children are still written and the cancelled one is left alone. Pure.
public enum OnDisconnectCancel {
    /// What becomes of each of `writes` (`.set` / `.update`): nil when it is dropped.
    public static func apply(_ writes: [WriteOperation], cancel: Path) -> [WriteOperation?] {
        writes.map { write in
            switch write {
            case .set(let opPath, let json, _):
                if cancel.contains(opPath) { return nil }
                guard let rel = opPath.relative(cancel) else { return write }
                guard let parts = split(.root, json, forgetting: rel) else { return write }
                return parts.isEmpty ? nil : .update(path: opPath, values: parts)
            case .update(let opPath, let parts, _):
                if cancel.contains(opPath) { return nil }
                var kept: [(Path, JSON)] = []
                for (p, v) in parts {
                    let absolute = opPath.appending(p)
                    if cancel.contains(absolute) { continue }
                    if let rel = absolute.relative(cancel), let split = split(p, v, forgetting: rel) {
                        kept += split
                    } else {
                        kept.append((p, v))
                    }
                }
                return kept.isEmpty ? nil : .update(path: opPath, values: kept)
            default:
                return write
            }
        }
    }

    /// The value `json` written at `base`, as writes of its parts without the one at `rel`
    /// (relative to `base`); nil when `json` is a leaf (a leaf's child cannot be cancelled).
    static func split(_ base: Path, _ json: JSON, forgetting rel: Path) -> [(Path, JSON)]? {
        guard let key = rel.first else { return [] }
        var children: KeyMap<JSON>
        switch json {
        case .object(let o): children = o.filter { $0.key != ".priority" && $0.key != ".value" }
        case .array(let a):
            children = [:]
            for (i, v) in a.enumerated() where !v.isNull { children[String(i)] = v }
        default: return nil
        }
        var parts: [(Path, JSON)] = []
        for (k, v) in children where k != key { parts.append((base.child(k), v)) }
        if rel.count > 1, let child = children[key] {
            parts += split(base.child(key), child, forgetting: rel.dropFirst) ?? [(base.child(key), child)]
        }
        return parts.sorted { $0.0 < $1.0 }
    }
}
