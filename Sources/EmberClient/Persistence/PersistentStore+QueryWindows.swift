import EmberCore
import EmberSyncTree
import Foundation
import GRDB

/// The data of filtering queries (a limit or a range): the window the server last sent for each,
/// stored whole per query, so a restarted app shows the same window. Kept out of `server_cache`
/// because a window is not the whole data at its path (children that left it are not removed).
extension PersistentStore {
    func saveQueryWindow(_ query: SyncQuery, _ node: Node) throws {
        try db.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO query_window (path, spec, json) VALUES (?, ?, ?)",
                           arguments: [Self.key(query.path), Self.specKey(query), Self.encode(node)])
        }
    }

    /// The stored window of `query`, if its data arrived complete in some run.
    func completeQueryWindow(_ query: SyncQuery) throws -> Node? {
        try db.read { db in
            guard let row = try Row.fetchOne(db, sql: """
                SELECT w.json FROM query_window w JOIN tracked_query t ON t.path = w.path AND t.spec = w.spec
                WHERE w.path = ? AND w.spec = ? AND t.complete = 1
                """, arguments: [Self.key(query.path), Self.specKey(query)]) else { return nil }
            return try Self.decode(row["json"], at: query.path)
        }
    }

    static func removeQueryWindow(_ db: GRDB.Database, path: Path, spec: String) throws {
        try db.execute(sql: "DELETE FROM query_window WHERE path = ? AND spec = ?", arguments: [key(path), spec])
    }

    static func windowsSize(_ db: GRDB.Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT COALESCE(SUM(LENGTH(CAST(json AS BLOB))), 0) FROM query_window") ?? 0
    }
}
