import EmberCore
import Foundation

extension Database {
    /// A reference to the location a URL names (SDK `reference(fromURL:)`), e.g. a
    /// `DatabaseReference.url` stored earlier. The URL must belong to this database: the same
    /// host and port as its URL (or the emulator's) and the same namespace; anything else stops
    /// the program with a message saying what was expected, as the SDK raises an exception.
    public func reference(fromURL databaseUrl: String) -> DatabaseReference {
        do { return try throwingReference(fromURL: databaseUrl) } catch { preconditionFailure(error.message) }
    }

    /// `reference(fromURL:)` that reports a foreign or malformed URL as an error.
    public func throwingReference(fromURL databaseUrl: String) throws(DatabaseError) -> DatabaseReference {
        let expected = "URL was expected to match the configured database URL \(url)"
        guard let c = URLComponents(string: databaseUrl), let given = Self.origin(c) else {
            throw DatabaseError(code: .invalidData, message: "(reference(fromURL:)) Invalid URL (\(databaseUrl)): \(expected)")
        }
        let (urls, emulator) = setup.withLock { ($0.urls, $0.emulator) }
        var origins = Set(urls.compactMap { URLComponents(string: $0).flatMap(Self.origin) })
        if let emulator { origins.insert("\(emulator.host.lowercased()):\(emulator.port)") }
        guard origins.contains(given), Self.namespace(ofURL: databaseUrl) == Self.namespace(ofURL: url) else {
            throw DatabaseError(code: .invalidData, message: "(reference(fromURL:)) URL \(databaseUrl) does not belong to this database: \(expected)")
        }
        let pathString = c.percentEncodedPath.removingPercentEncoding ?? c.path
        do { return DatabaseReference(database: self, path: try Database.parsePath(pathString)) } catch {
            throw DatabaseError(code: .invalidData, message: "(reference(fromURL:)) Invalid path in \(databaseUrl): \(error)")
        }
    }

    /// `host:port` with the scheme's default port, host lower-cased; nil unless http(s)/ws(s).
    private static func origin(_ c: URLComponents) -> String? {
        guard let scheme = c.scheme?.lowercased(), let host = c.host?.lowercased(), !host.isEmpty else { return nil }
        let port: Int
        switch scheme {
        case "http", "ws": port = c.port ?? 80
        case "https", "wss": port = c.port ?? 443
        default: return nil
        }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return "\(bare):\(port)"
    }

    /// Cancels every write not yet acknowledged by the server (SDK `purgeOutstandingWrites`):
    /// their local changes are rolled back and their completions get a `writeCanceled` error;
    /// queued onDisconnect operations are dropped the same way and running transactions end
    /// with that error. Meant for apps that went offline with writes they no longer want sent.
    public func purgeOutstandingWrites() { repo.purgeOutstandingWrites() }
}
