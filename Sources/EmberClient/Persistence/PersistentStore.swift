import EmberCore
import Foundation
import GRDB
import Logging

/// The disk cache of one database (SDK persistence storage engine), an SQLite file through GRDB:
/// the server data of synced paths (`server_cache`), the last window of each filtering query
/// (`query_window`), the queries tracked and whether their data is complete (`tracked_query`), and
/// the writes not yet acknowledged, in order (`pending_write`).
/// Used from the Repo's queue (GRDB serializes access anyway). Every method throws; the
/// `PersistenceManager` decides what an error means for the app.
final class PersistentStore {
    let file: URL
    let db: DatabaseQueue

    enum StoreError: Error, CustomStringConvertible {
        case corrupt(String)
        /// Written by a later version of the client whose schema this one does not know.
        case unknownSchema([String])
        var description: String {
            switch self {
            case .corrupt(let detail): return "integrity check failed: \(detail)"
            case .unknownSchema(let ids): return "unknown schema versions \(ids)"
            }
        }
    }

    static let tables = ["server_cache", "tracked_query", "pending_write", "query_window"]

    /// Opens (creating if needed) the store at `file`; throws if the file is not a readable,
    /// intact Ember cache.
    init(file: URL) throws {
        self.file = file
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        var config = Configuration()
        // Another process (an app's earlier instance being torn down) may hold the file briefly.
        config.busyMode = .timeout(5)
        // WAL with NORMAL sync: a committed transaction survives the app being killed (what the
        // write queue needs) without an fsync per server update; only a power loss may lose the
        // last ones.
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        db = try DatabaseQueue(path: file.path, configuration: config)
        // A file that is not SQLite, or a damaged one, fails here rather than on some later read.
        let check = try db.read { db in try String.fetchAll(db, sql: "PRAGMA quick_check") }
        guard check == ["ok"] else { throw StoreError.corrupt(check.prefix(3).joined(separator: "; ")) }
        let migrator = Self.migrator
        try migrator.migrate(db)
        try db.read { db in
            let applied = try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations")
            let unknown = applied.filter { !migrator.migrations.contains($0) }
            if !unknown.isEmpty { throw StoreError.unknownSchema(unknown) }
            for table in Self.tables {
                guard try db.tableExists(table) else { throw StoreError.corrupt("table \(table) is missing") }
            }
        }
        // Nothing is listened to yet in this run.
        try db.write { db in try db.execute(sql: "UPDATE tracked_query SET active = 0 WHERE active != 0") }
    }

    private static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1") { db in
            // Rows never nest (no row's path is an ancestor of another's), so a path's data is
            // either inside one ancestor row or assembled from the rows at and below it.
            try db.execute(sql: """
                CREATE TABLE server_cache (path TEXT PRIMARY KEY NOT NULL, json TEXT NOT NULL);
                CREATE TABLE tracked_query (
                    id INTEGER PRIMARY KEY,
                    path TEXT NOT NULL,
                    spec TEXT NOT NULL,
                    loads_all INTEGER NOT NULL,
                    complete INTEGER NOT NULL DEFAULT 0,
                    active INTEGER NOT NULL DEFAULT 0,
                    keep_synced INTEGER NOT NULL DEFAULT 0,
                    last_use INTEGER NOT NULL,
                    UNIQUE (path, spec));
                CREATE TABLE pending_write (
                    id INTEGER PRIMARY KEY NOT NULL,
                    path TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    data TEXT NOT NULL);
                """)
        }
        m.registerMigration("v2") { db in
            // The last window of each filtering query (limits, ranges): kept apart from the
            // server cache, which holds only whole data of plain listens.
            try db.execute(sql: """
                CREATE TABLE query_window (path TEXT NOT NULL, spec TEXT NOT NULL, json TEXT NOT NULL,
                                           PRIMARY KEY (path, spec));
                """)
        }
        m.registerMigration("v3") { db in
            // The writer id each queued write is sent under (exactly-once across restarts).
            try db.execute(sql: "ALTER TABLE pending_write ADD COLUMN writer TEXT")
        }
        return m
    }

    // MARK: - Path keys

    /// `/a/b/` (root `/`): every descendant's key starts with its ancestor's, so a subtree is
    /// one key range in SQLite's byte order.
    static func key(_ path: Path) -> String {
        path.isRoot ? "/" : "/" + path.segments.joined(separator: "/") + "/"
    }

    /// The end of `key`'s subtree range: the trailing `/` (0x2F) raised to `0` (0x30).
    static func upperBound(_ key: String) -> String { String(key.dropLast()) + "0" }

    static func path(fromKey key: String) -> Path {
        Path(validated: key.split(separator: "/", omittingEmptySubsequences: true).map(String.init))
    }

    /// Keys of the strict ancestors of `path`, root first.
    static func ancestorKeys(_ path: Path) -> [String] {
        (0..<path.count).map { key(Path(validated: Array(path.segments.prefix($0)))) }
    }

    static func encode(_ node: Node) -> String { node.exportJSON().serialized() }

    static func decode(_ text: String, at path: Path) throws -> Node {
        try Node(json: try JSON.parse(text), depth: path.count)
    }
}

// MARK: - Opening with recovery

extension PersistentStore {
    /// Opens the store for `file`; a file that cannot be opened or fails its integrity check is
    /// logged, moved aside (`<name>.corrupt-<time>`) and replaced by an empty store. Queued writes
    /// still readable from it are carried over; if none can be read that is logged as an error.
    /// Returns nil (persistence off for this run, logged) only if even a fresh file cannot be made.
    static func openRecovering(file: URL, logger: Logger) -> PersistentStore? {
        do {
            return try PersistentStore(file: file)
        } catch {
            logger.error("ember persistence: cache file \(file.path) is unreadable (\(error)); replacing it")
        }
        let salvaged = salvageWrites(from: file)
        let aside = file.deletingLastPathComponent()
            .appendingPathComponent(file.lastPathComponent + ".corrupt-\(Int(Date().timeIntervalSince1970))")
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let from = URL(fileURLWithPath: file.path + suffix)
            guard FileManager.default.fileExists(atPath: from.path) else { continue }
            let to = URL(fileURLWithPath: aside.path + suffix)
            try? FileManager.default.removeItem(at: to)
            do { try FileManager.default.moveItem(at: from, to: to) } catch {
                try? FileManager.default.removeItem(at: from)
            }
        }
        logger.error("ember persistence: the unreadable cache was moved to \(aside.path)")
        let store: PersistentStore
        do { store = try PersistentStore(file: file) } catch {
            logger.error("ember persistence: cannot create \(file.path) (\(error)); persistence is off for this run")
            return nil
        }
        switch salvaged {
        case .success(let writes):
            do {
                for w in writes { try store.saveWrite(w) }
                logger.warning("ember persistence: carried \(writes.count) queued write(s) over from the unreadable cache")
            } catch {
                logger.error("ember persistence: \(writes.count) queued write(s) from the unreadable cache could not be saved again (\(error)); they are lost")
            }
        case .failure(let error):
            logger.error("ember persistence: queued writes in the unreadable cache could not be read (\(error)); any writes queued there are lost")
        }
        return store
    }

    /// Reads `pending_write` from a damaged file, read-only, without trusting anything else in it.
    private static func salvageWrites(from file: URL) -> Result<[StoredWrite], any Error> {
        guard FileManager.default.fileExists(atPath: file.path) else { return .success([]) }
        do {
            var config = Configuration()
            config.readonly = true
            let queue = try DatabaseQueue(path: file.path, configuration: config)
            defer { try? queue.close() }
            let exists = try queue.read { db in try db.tableExists("pending_write") }
            guard exists else { return .success([]) }
            return .success(try queue.read { db in try Self.fetchWrites(db) })
        } catch {
            return .failure(error)
        }
    }
}
