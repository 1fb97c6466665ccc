import EmberCore
import Foundation
import Synchronization

/// Options beyond the SDK's: reconnect timing (tests shorten it) and the transport.
public struct DatabaseConfiguration: Sendable {
    public var reconnectPolicy: ReconnectPolicy
    /// Where observer and completion callbacks run; nil = a private serial queue (Linux has no
    /// main run loop to rely on).
    public var callbackQueue: DispatchQueue?
    /// A credential sent on every connect: a Firebase ID token / JWT (`auth`) or an admin token
    /// such as the emulator's `owner` (`gauth`).
    public var authToken: String?
    /// Asked for the credential before every connect (overrides `authToken`); see
    /// `Database.setAuthTokenProvider`.
    public var authTokenProvider: AuthTokenProvider?
    /// Spread a cluster's clients over its nodes (default true): the client starts at a random
    /// given URL and moves once to a random node of those the first handshake names (members and
    /// learners; reads and listens are served there, writes forwarded to the leader), and fails
    /// over in its own random order. Off: the given URLs in order, first one first.
    public var spreadsConnections = true
    /// The seed of those choices (nil: a random one per database); tests fix it to replay them.
    public var connectionSeed: UInt64?
    var transport: any WireTransport

    public init(reconnectPolicy: ReconnectPolicy = .default, callbackQueue: DispatchQueue? = nil, authToken: String? = nil) {
        self.reconnectPolicy = reconnectPolicy
        self.callbackQueue = callbackQueue
        self.authToken = authToken
        transport = WebSocketTransport()
    }
}

/// A connection to one database (SDK `Database`), e.g. `Database(url: "http://127.0.0.1:9000?ns=demo")`;
/// without `ns` the server's default namespace is used.
public final class Database: Sendable {
    /// The URL the database was created with.
    public let url: String
    /// The WebSocket URL the client connects to first.
    var websocketURL: String { websocketURLs[0] }
    /// Every node's WebSocket URL, in the order they are tried (the emulator's once `useEmulator`).
    var websocketURLs: [String] { setup.withLock { $0.websocketURLs } }
    /// What the connection is made from, and the Repo once made (see Database+Setup).
    let setup: Mutex<DatabaseSetup>

    /// Keeps synced data and queued writes on disk (SDK `isPersistenceEnabled`), so an app started
    /// offline shows its last data and sends the writes it made before it stopped. Default false.
    /// Set it before the first reference is used; setting it later stops the program.
    public var isPersistenceEnabled: Bool {
        get { setup.withLock { $0.persistence.enabled } }
        set { beforeFirstUse("isPersistenceEnabled") { $0.persistence.enabled = newValue } }
    }

    /// The disk cache's size before least-recently-used data nobody listens to is pruned (SDK
    /// `persistenceCacheSizeBytes`): default 10 MB, allowed 1 MB to 100 MB. Set before first use.
    public var persistenceCacheSizeBytes: UInt {
        get { UInt(setup.withLock { $0.persistence.cacheSizeBytes }) }
        set {
            precondition(newValue >= PersistenceLimits.minimumCacheSizeBytes && newValue <= PersistenceLimits.maximumCacheSizeBytes,
                         "persistenceCacheSizeBytes must be between 1 MB (1048576) and 100 MB (104857600), not \(newValue)")
            beforeFirstUse("persistenceCacheSizeBytes") { $0.persistence.cacheSizeBytes = Int(newValue) }
        }
    }

    /// Where the cache file lives (one file per database URL). Default: Application Support/ember
    /// on Apple platforms, `$XDG_DATA_HOME/ember` or `~/.local/share/ember` elsewhere. Set before
    /// first use.
    public var persistenceDirectory: URL {
        get { setup.withLock { $0.persistence.directory } ?? PersistenceSettings.defaultDirectory }
        set { beforeFirstUse("persistenceDirectory") { $0.persistence.directory = newValue } }
    }

    /// The cache file this database uses when persistence is enabled.
    public var persistenceFile: URL {
        persistenceDirectory.appendingPathComponent(PersistenceSettings.fileName(forDatabaseURL: url))
    }

    private static let shared = Mutex<[String: Database]>([:])

    /// The shared instance for `url` (created on first use).
    public static func database(url: String) -> Database {
        shared.withLock { instances in
            if let db = instances[url] { return db }
            let db = Database(url: url)
            db.applyEmulatorEnvironment()
            instances[url] = db
            return db
        }
    }

    /// The shared instance for `$EMBER_DATABASE_URL`, else for `$FIREBASE_DATABASE_EMULATOR_HOST`
    /// (`host:port`), else for `http://127.0.0.1:9000` (emberd's default port).
    public static func database() -> Database {
        let env = ProcessInfo.processInfo.environment
        if let url = env["EMBER_DATABASE_URL"], !url.isEmpty { return database(url: url) }
        if let host = env["FIREBASE_DATABASE_EMULATOR_HOST"], !host.isEmpty { return database(url: "http://\(host)") }
        return database(url: "http://127.0.0.1:9000")
    }

    /// A new, independent instance with its own connection and cache.
    public convenience init(url: String) {
        self.init(url: url, configuration: DatabaseConfiguration())
    }

    public convenience init(url: String, configuration: DatabaseConfiguration) {
        self.init(urls: [url], configuration: configuration)
    }

    /// A database served by several nodes (an Ember cluster): `urls` are the nodes' URLs, with
    /// the same `ns`. The client connects to the first and, whenever its connection fails or
    /// drops, to the next (round-robin, with the reconnect backoff), re-sending its listens and
    /// pending writes there. `url` is the first.
    public init(urls: [String], configuration: DatabaseConfiguration = DatabaseConfiguration()) {
        precondition(!urls.isEmpty, "Database needs at least one URL")
        var sockets: [String] = []
        for url in urls {
            guard let ws = Database.websocketURL(for: url) else {
                preconditionFailure("Invalid database URL \(url): expected http(s)://host[:port][?ns=NAME]")
            }
            sockets.append(ws)
        }
        self.url = urls[0]
        setup = Mutex(DatabaseSetup(urls: urls, websocketURLs: sockets, configuration: configuration))
    }

    deinit { setup.withLock { $0.repo }?.shutdown() }

    /// `http://host:port?ns=x` → `ws://host:port/.ws?v=5&ns=x` (reference §6.1).
    static func websocketURL(for url: String) -> String? {
        // The same origin as nodes learned from a handshake (`NodeList`), so they compare equal.
        guard let c = URLComponents(string: url), var s = NodeList.websocketOrigin(ofClientURL: url) else { return nil }
        s += "/.ws?v=5"
        if let ns = c.queryItems?.first(where: { $0.name == "ns" })?.value, !ns.isEmpty {
            s += "&ns=" + (ns.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed) ?? ns)
        }
        return s
    }

    /// Where callbacks run. Set it before observing; defaults to a private serial queue.
    public var callbackQueue: DispatchQueue {
        get { setup.withLock { $0.repo?.callbackQueue ?? $0.callbackQueue } }
        set {
            setup.withLock { s in
                s.callbackQueue = newValue
                s.repo?.callbackQueue = newValue
            }
        }
    }

    public func reference() -> DatabaseReference { DatabaseReference(database: self, path: .root) }

    public func reference(withPath path: String) -> DatabaseReference {
        do { return DatabaseReference(database: self, path: try Database.parsePath(path)) } catch {
            preconditionFailure("Invalid path \(path): \(error)")
        }
    }

    /// A slash-separated path; `.info` is allowed as the first segment (client-local data).
    static func parsePath(_ string: String, under base: Path = .root) throws -> Path {
        var parts = string.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        var prefix: [String] = []
        if base.isRoot, parts.first == ".info" {
            prefix = [".info"]
            parts.removeFirst()
        }
        let rest = try Path(parts.joined(separator: "/"))
        return base.appending(Path(validated: prefix + rest.segments))
    }

    /// Changes the credential (nil signs out); applies now and on every reconnect.
    public func setAuthToken(_ token: String?) { repo.connection.submit(.setAuthToken(token)) }

    /// Where credentials come from (the SDKs' auth token provider): called before every connect,
    /// with `forceRefresh` true after the server revoked (`ac`, e.g. the token expired) or refused
    /// the last token. A thrown error postpones the connection (with back-off). nil removes it.
    public func setAuthTokenProvider(_ provider: AuthTokenProvider?) { repo.connection.submit(.setAuthTokenProvider(provider)) }

    /// Disconnects; writes keep applying locally and wait in the queue until `goOnline()`.
    public func goOffline() { repo.connection.submit(.goOffline) }

    public func goOnline() { repo.connection.submit(.goOnline) }

    /// Closes the connection for good (tests; the SDK ties this to the app's lifetime).
    public func shutdown() {
        // A database never used has no connection to close.
        setup.withLock { $0.repo }?.shutdown()
        Database.shared.withLock { instances in
            if instances[url] === self { instances[url] = nil }
        }
    }
}

/// Returns the credential to connect with (a JWT, or an admin token), nil for none. `forceRefresh`
/// asks for a new token rather than a cached one (the server revoked or refused the last).
public typealias AuthTokenProvider = @Sendable (_ forceRefresh: Bool) async throws -> String?
