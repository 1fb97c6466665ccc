import EmberCore

/// A client connection that registered onDisconnect writes, as the replicated bookkeeping names
/// it: the node it is connected to, that node's incarnation (a token picked at each start), and
/// the connection's id.
public struct OnDisconnectRef: Sendable, Hashable, CustomStringConvertible {
    public var node: String
    public var incarnation: String
    public var id: String

    public init(node: String, incarnation: String, id: String) {
        self.node = node
        self.incarnation = incarnation
        self.id = id
    }

    public var description: String { "\(node)/\(incarnation)/\(id)" }
}

/// A write a session registered to run when it ends: a set or an update, without a condition.
public struct OnDisconnectWrite: Sendable {
    public var path: Path
    public var kind: WriteRequest.Kind

    public init(path: Path, kind: WriteRequest.Kind) {
        self.path = path
        self.kind = kind
    }

    /// `oc` at `path` with Firebase's semantics: writes at or below it are dropped, and so is
    /// that part of writes above it (a set above is split into its other children).
    public static func cancel(_ writes: [OnDisconnectWrite], at path: Path) -> [OnDisconnectWrite] {
        LMDBTranslation.cancelOnDisconnect(writes, at: path)
    }
}

/// onDisconnect bookkeeping carried by the log, so every replica knows each session's pending
/// writes and which incarnation of each node still holds its sessions.
///
/// Lifecycle: a node logs `holder` before its sessions register; its sessions `register` writes
/// (judged by the rules when they run) and `cancel` them; a clean disconnect logs `run`. When
/// the node dies or is cut off past the lease, the leader logs `seal`, and then `run` for each
/// session of an incarnation that no longer holds its node's sessions. A session's writes are
/// deleted when they run, so they run at most once, whoever logs the `run`.
public enum OnDisconnectCommand: Sendable {
    /// `node` started as `incarnation`: from now on only that incarnation's sessions may register.
    case holder(node: String, incarnation: String)
    /// `node` was unresponsive past the lease: if `incarnation` still holds its sessions, it
    /// stops holding them (they become orphans and take no new registrations).
    case seal(node: String, incarnation: String)
    /// A session's write to run when it ends.
    case register(session: OnDisconnectRef, write: OnDisconnectWrite)
    /// `oc`: drops the session's writes at or below `path`.
    case cancel(session: OnDisconnectRef, path: Path)
    /// The session ended, or was orphaned: its writes run now, in registration order.
    case run(session: OnDisconnectRef)

    /// The namespace `holder` and `seal` are logged in (the bookkeeping's own; clients cannot
    /// read or write it).
    public static var bookkeepingNamespace: String { LMDBTranslation.onDisconnectNamespace }
}
