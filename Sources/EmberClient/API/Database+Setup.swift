import EmberCore
import Foundation
import Synchronization

/// What a database's connection is made from. The Repo (and with it the connection) is created
/// on first use, as in the SDK, so settings that must precede it (`useEmulator`) can still change
/// where it connects.
struct DatabaseSetup {
    /// The URLs the database was created with.
    let urls: [String]
    var websocketURLs: [String]
    var configuration: DatabaseConfiguration
    var callbackQueue: DispatchQueue
    /// `host:port` of the emulator set with `useEmulator` or `FIREBASE_DATABASE_EMULATOR_HOST`.
    var emulator: (host: String, port: Int)?
    /// Disk persistence (`isPersistenceEnabled` and its settings), fixed at first use.
    var persistence = PersistenceSettings()
    var repo: Repo?

    init(urls: [String], websocketURLs: [String], configuration: DatabaseConfiguration) {
        self.urls = urls
        self.websocketURLs = websocketURLs
        self.configuration = configuration
        callbackQueue = configuration.callbackQueue ?? DispatchQueue(label: "ember.client.callbacks")
    }
}

extension Database {
    /// The database's Repo, created (and connecting) on first use.
    var repo: Repo {
        setup.withLock { s in
            if let repo = s.repo { return repo }
            let c = s.configuration
            let seed = c.spreadsConnections ? (c.connectionSeed ?? UInt64.random(in: .min ... .max)) : nil
            let repo = Repo(websocketURLs: s.websocketURLs, transport: c.transport, policy: c.reconnectPolicy,
                            callbackQueue: s.callbackQueue, authToken: c.authToken, authTokenProvider: c.authTokenProvider,
                            spreadSeed: seed)
            repo.database = self
            // The disk cache is attached before any operation reaches the Repo, so cached data
            // and the restored write queue are in place for the first listener or write.
            if s.persistence.enabled, let manager = PersistenceManager.open(databaseURL: url, settings: s.persistence) {
                repo.attachPersistence(manager)
            }
            s.repo = repo
            ClientLog.log("Database \(url) connects to \(s.websocketURLs.joined(separator: ", "))")
            return repo
        }
    }

    /// Changes a setting that only applies before first use; after it, a programming error (the
    /// SDK raises an exception).
    func beforeFirstUse(_ name: String, _ change: (inout DatabaseSetup) -> Void) {
        setup.withLock { s in
            precondition(s.repo == nil, "Calls to \(name) must be made before any other usage of the Database instance.")
            change(&s)
        }
    }

    /// Connects to a local emulator (or any Ember node) at `host:port` instead of the database's
    /// URL, keeping its namespace (`?ns=`, or the `NAME` of `https://NAME.firebaseio.com`). As in
    /// the SDK it must be called before the database is used (a reference made, data read or
    /// written); calling it later stops the program with that message.
    public func useEmulator(withHost host: String, port: Int) {
        do { try emulate(host: host, port: port) } catch { preconditionFailure(error.message) }
    }

    func emulate(host: String, port: Int) throws(DatabaseError) {
        precondition(!host.isEmpty && (1...65535).contains(port), "useEmulator: invalid host \"\(host)\" or port \(port)")
        var url = "http://\(host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host):\(port)"
        if let ns = Database.namespace(ofURL: self.url) { url += "?ns=" + ns }
        guard let socket = Database.websocketURL(for: url) else {
            throw DatabaseError(code: .other, status: "misuse", message: "useEmulator: invalid host \"\(host)\"")
        }
        let inUse = setup.withLock { s in
            if s.repo != nil { return true }
            s.websocketURLs = [socket]
            s.emulator = (host, port)
            return false
        }
        if inUse {
            throw DatabaseError(code: .other, status: "misuse",
                                message: "Cannot connect to the emulator after the database is in use. Call useEmulator(withHost:port:) before creating a reference or reading data.")
        }
    }

    /// The SDK's `FIREBASE_DATABASE_EMULATOR_HOST` (`host:port`): databases obtained with
    /// `Database.database(...)` connect there.
    func applyEmulatorEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard let value = environment["FIREBASE_DATABASE_EMULATOR_HOST"], !value.isEmpty else { return }
        guard let (host, port) = Database.hostAndPort(value) else {
            ClientLog.warn("FIREBASE_DATABASE_EMULATOR_HOST=\(value) is not host:port; ignored")
            return
        }
        try? emulate(host: host, port: port)
    }

    /// `host:port` or `[v6]:port`.
    static func hostAndPort(_ s: String) -> (String, Int)? {
        guard let colon = s.lastIndex(of: ":"), let port = Int(s[s.index(after: colon)...]), (1...65535).contains(port) else { return nil }
        var host = String(s[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return host.isEmpty ? nil : (host, port)
    }

    /// The namespace a database URL names: `?ns=NAME`, else the first label of a Firebase host
    /// (`NAME.firebaseio.com`, `NAME.REGION.firebasedatabase.app`); nil for the server's default.
    static func namespace(ofURL url: String) -> String? {
        guard let c = URLComponents(string: url) else { return nil }
        if let ns = c.queryItems?.first(where: { $0.name == "ns" })?.value, !ns.isEmpty { return ns }
        if let host = c.host?.lowercased(), host.hasSuffix(".firebaseio.com") || host.hasSuffix(".firebasedatabase.app") {
            return host.split(separator: ".").first.map(String.init)
        }
        return nil
    }
}
