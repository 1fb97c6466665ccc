import Foundation

/// What an app chose for the disk cache before the database was first used (SDK
/// `persistenceEnabled`, `persistenceCacheSizeBytes`), and where the files live.
public enum PersistenceLimits {
    /// The SDK's default cache size: 10 MB.
    public static let defaultCacheSizeBytes = 10 * 1024 * 1024
    /// The SDK's bounds: at least 1 MB, at most 100 MB.
    public static let minimumCacheSizeBytes = 1024 * 1024
    public static let maximumCacheSizeBytes = 100 * 1024 * 1024
    /// Queued writes replayed from the last run are logged one by one up to this many.
    static let maxLoggedRestoredWrites = 20
}

struct PersistenceSettings: Sendable {
    var enabled = false
    var cacheSizeBytes = PersistenceLimits.defaultCacheSizeBytes
    /// nil: `PersistenceSettings.defaultDirectory`.
    var directory: URL?

    /// Application Support on Apple platforms; `$XDG_DATA_HOME/ember` (else `~/.local/share/ember`)
    /// elsewhere.
    static var defaultDirectory: URL {
        #if canImport(Darwin)
        let base = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
            ?? URL(fileURLWithPath: NSTemporaryDirectory())
        return base.appendingPathComponent("ember", isDirectory: true)
        #else
        let env = ProcessInfo.processInfo.environment
        if let xdg = env["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            return URL(fileURLWithPath: xdg, isDirectory: true).appendingPathComponent("ember", isDirectory: true)
        }
        let home = env["HOME"].map { URL(fileURLWithPath: $0, isDirectory: true) }
            ?? FileManager.default.homeDirectoryForCurrentUser
        return home.appendingPathComponent(".local/share/ember", isDirectory: true)
        #endif
    }

    /// One file per database URL: a readable prefix of the URL plus a hash of all of it, so two
    /// URLs that differ only in characters a file name cannot hold still get different files.
    static func fileName(forDatabaseURL url: String) -> String {
        let readable = String(url.map { $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" ? $0 : "_" }.prefix(80))
        // FNV-1a, 64 bit: stable across runs and platforms (Swift's Hasher is seeded per process).
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in url.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return "\(readable)-\(String(hash, radix: 16)).sqlite"
    }
}
