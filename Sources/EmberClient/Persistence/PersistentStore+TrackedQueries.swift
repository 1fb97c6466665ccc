import EmberCore
import EmberSyncTree
import Foundation
import GRDB

/// A query the client listened to (SDK `TrackedQuery`): whether its data arrived in full
/// (`complete`), whether it is listened to in this run (`active`), whether the app asked to keep
/// it synced, and when it was last used (a counter, for least-recently-used pruning).
struct TrackedQuery: Equatable, Sendable {
    var path: Path
    /// The query's wire form (`{}` for the default query).
    var spec: String
    var loadsAllData: Bool
    var complete: Bool
    var active: Bool
    var keepSynced: Bool
    var lastUse: Int
}

extension PersistentStore {
    static func specKey(_ query: SyncQuery) -> String {
        query.spec.loadsAllData ? "{}" : query.spec.wireObject.serialized()
    }

    /// Records a use of `query`; `active` true when its listen starts, false when it stops.
    func touchQuery(_ query: SyncQuery, active: Bool) throws {
        try db.write { db in
            let use = try Self.nextUse(db)
            try db.execute(sql: """
                INSERT INTO tracked_query (path, spec, loads_all, active, last_use) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (path, spec) DO UPDATE SET active = excluded.active, last_use = excluded.last_use
                """, arguments: [Self.key(query.path), Self.specKey(query), query.spec.loadsAllData, active, use])
        }
    }

    /// A one-time read (getData) of `query` was answered: tracked as complete, inactive unless a
    /// listener already made it active (which stays as it is).
    func trackAnsweredRead(_ query: SyncQuery) throws {
        try db.write { db in
            let use = try Self.nextUse(db)
            try db.execute(sql: """
                INSERT INTO tracked_query (path, spec, loads_all, active, complete, last_use) VALUES (?, ?, ?, 0, 1, ?)
                ON CONFLICT (path, spec) DO UPDATE SET complete = 1, last_use = excluded.last_use
                """, arguments: [Self.key(query.path), Self.specKey(query), query.spec.loadsAllData, use])
        }
    }

    /// The server sent all of `query`'s data.
    func setQueryComplete(_ query: SyncQuery) throws {
        try db.write { db in
            try db.execute(sql: "UPDATE tracked_query SET complete = 1 WHERE path = ? AND spec = ?",
                           arguments: [Self.key(query.path), Self.specKey(query)])
        }
    }

    func setKeepSynced(_ query: SyncQuery, _ on: Bool) throws {
        try db.write { db in
            let use = try Self.nextUse(db)
            try db.execute(sql: """
                INSERT INTO tracked_query (path, spec, loads_all, keep_synced, last_use) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (path, spec) DO UPDATE SET keep_synced = excluded.keep_synced, last_use = excluded.last_use
                """, arguments: [Self.key(query.path), Self.specKey(query), query.spec.loadsAllData, on, use])
        }
    }

    /// Whether complete server data is cached at `path`: a complete query that loads all data
    /// at `path` or above it.
    func isComplete(at path: Path) throws -> Bool {
        try db.read { db in
            let keys = Self.ancestorKeys(path) + [Self.key(path)]
            let marks = Array(repeating: "?", count: keys.count).joined(separator: ",")
            return try Bool.fetchOne(db, sql: """
                SELECT EXISTS (SELECT 1 FROM tracked_query WHERE loads_all = 1 AND complete = 1 AND path IN (\(marks)))
                """, arguments: StatementArguments(keys)) ?? false
        }
    }

    func trackedQueries() throws -> [TrackedQuery] {
        try db.read { db in try Self.fetchTracked(db, where: "1") }
    }

    static func fetchTracked(_ db: GRDB.Database, where condition: String) throws -> [TrackedQuery] {
        try Row.fetchAll(db, sql: """
            SELECT path, spec, loads_all, complete, active, keep_synced, last_use FROM tracked_query
            WHERE \(condition) ORDER BY last_use
            """).map { row in
            TrackedQuery(path: path(fromKey: row["path"]), spec: row["spec"], loadsAllData: row["loads_all"],
                         complete: row["complete"], active: row["active"], keepSynced: row["keep_synced"],
                         lastUse: row["last_use"])
        }
    }

    private static func nextUse(_ db: GRDB.Database) throws -> Int {
        (try Int.fetchOne(db, sql: "SELECT MAX(last_use) FROM tracked_query") ?? 0) + 1
    }
}
