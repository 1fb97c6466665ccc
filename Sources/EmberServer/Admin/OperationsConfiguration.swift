/// Settings of the operations endpoints (health, readiness, metrics, status, backup).
public struct OperationsConfiguration: Sendable {
    /// This node's client URL as others reach it (shown in `/.ember/status`; `ember status` uses
    /// it to find every node from any one).
    public var advertisedURL: String?
    /// Client URLs of the cluster members by node id (`--client-urls`), for the same discovery.
    public var memberURLs: [String: String] = [:]
    /// `/readyz` fails while this node's applied index trails the commit index it knows of by
    /// more than this many entries (a node catching up, e.g. after a restart).
    public var readyMaxLagEntries: UInt64 = 1_000
    /// A cluster member holds client reads from its start until it caught up with the cluster
    /// (`CatchUpGate`): at most this many at once, each at most this long
    /// (`--catch-up-max-held`, `--catch-up-wait`).
    public var catchUp: CatchUpGate.Limits = .default
    /// Backups produced at the same time; more are answered 503 (each holds an LMDB read
    /// transaction and a temporary file the size of the data).
    public var maxConcurrentBackups = 1
    /// Whether the web console is served at `/.ember/console/` (`--no-console` turns it off).
    public var console = true
    /// `--auto-defrag`: when the node defragments its data file itself; nil (default): never.
    public var autoDefrag: AutoDefragPolicy?

    public init() {}

    /// The client URLs a WebSocket handshake names (Ember's `en` field), so a client given one
    /// node finds the others: for each current member (`directory`; nil: every `--client-urls`
    /// entry) the URL given when it was added, else its `--client-urls` entry; sorted. Only
    /// configured URLs: a node's listen address may not be reachable by clients.
    public func handshakeClientURLs(directory: MemberDirectory?) -> [String] {
        guard let directory else { return Set(memberURLs.values).sorted() }
        return Set(directory.members.compactMap { id, member in member.url ?? memberURLs[id] }).sorted()
    }
}
