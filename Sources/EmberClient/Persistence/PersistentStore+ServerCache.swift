import EmberCore
import Foundation
import GRDB

/// The server data of synced paths (SDK server cache). Rows hold subtrees and never nest; a
/// subtree whose JSON is larger than `splitBytes` is stored as one row per child (recursively), so
/// a small server update rewrites a small row, not the whole listened tree. A write inside an
/// existing row rewrites that row, a write above rows replaces them.
extension PersistentStore {
    /// Largest JSON (bytes) kept in one row when the node could be split into its children.
    static let splitBytes = 16 * 1024

    /// The cached server data at `path`, nil when nothing at or below it is cached. Whether it is
    /// complete is the tracked queries' business (`isComplete(at:)`).
    func serverCache(at path: Path) throws -> Node? {
        try db.read { db in try Self.node(db, at: path) }
    }

    func overwriteServerCache(at path: Path, with node: Node) throws {
        try db.write { db in try Self.overwrite(db, path, node) }
    }

    /// Children (relative paths) replaced at once, as a server merge does.
    func mergeServerCache(at path: Path, _ children: [(Path, Node)]) throws {
        try db.write { db in
            for (rel, node) in children { try Self.overwrite(db, path.appending(rel), node) }
        }
    }

    /// Bytes of cached JSON, query windows included (what `persistenceCacheSizeBytes` limits).
    func serverCacheSize() throws -> Int {
        try db.read { db in try Self.size(db) }
    }

    /// Server cache and query windows together.
    static func size(_ db: GRDB.Database) throws -> Int {
        (try Int.fetchOne(db, sql: "SELECT COALESCE(SUM(LENGTH(CAST(json AS BLOB))), 0) FROM server_cache") ?? 0)
            + (try windowsSize(db))
    }

    static func node(_ db: GRDB.Database, at path: Path) throws -> Node? {
        if let (rowPath, text) = try ancestorRow(db, of: path) {
            return try decode(text, at: rowPath).child(at: rowPath.relative(path)!)
        }
        let k = key(path)
        let rows = try Row.fetchAll(db, sql: "SELECT path, json FROM server_cache WHERE path >= ? AND path < ? ORDER BY path",
                                    arguments: [k, upperBound(k)])
        if rows.isEmpty { return nil }
        var node = Node.empty
        for row in rows {
            let rowPath = Self.path(fromKey: row["path"])
            node = node.setting(try decode(row["json"], at: rowPath), at: path.relative(rowPath)!)
        }
        return node
    }

    static func overwrite(_ db: GRDB.Database, _ path: Path, _ node: Node) throws {
        if let (rowPath, text) = try ancestorRow(db, of: path) {
            let updated = try decode(text, at: rowPath).setting(node, at: rowPath.relative(path)!)
            try db.execute(sql: "DELETE FROM server_cache WHERE path = ?", arguments: [key(rowPath)])
            try insert(db, rowPath, updated)
            return
        }
        let k = key(path)
        try db.execute(sql: "DELETE FROM server_cache WHERE path >= ? AND path < ?", arguments: [k, upperBound(k)])
        try insert(db, path, node)
    }

    /// Stores `node` at `path` (no rows may be at or below it), split into child rows if large.
    /// An empty node is stored too: "the server has nothing here" is data a listener shows.
    private static func insert(_ db: GRDB.Database, _ path: Path, _ node: Node) throws {
        let text = encode(node)
        // A priority or a leaf belongs to the node itself, so only plain objects are split.
        if text.utf8.count > splitBytes, node.leaf == nil, node.priority == nil, node.hasChildren {
            for (key, child) in node.children { try insert(db, path.child(key), child) }
            return
        }
        try db.execute(sql: "INSERT INTO server_cache (path, json) VALUES (?, ?)", arguments: [key(path), text])
    }

    /// Drops the cached data at `path` except the subtrees at `keeping` (paths below `path`).
    static func removeData(_ db: GRDB.Database, at path: Path, keeping: [Path]) throws {
        let current = try node(db, at: path) ?? .empty
        var kept = Node.empty
        for keep in keeping {
            guard let rel = path.relative(keep) else { continue }
            kept = kept.setting(current.child(at: rel), at: rel)
        }
        if let (rowPath, text) = try ancestorRow(db, of: path) {
            let updated = try decode(text, at: rowPath).setting(kept, at: rowPath.relative(path)!)
            try db.execute(sql: "DELETE FROM server_cache WHERE path = ?", arguments: [key(rowPath)])
            if !updated.isEmpty { try insert(db, rowPath, updated) }
            return
        }
        let k = key(path)
        try db.execute(sql: "DELETE FROM server_cache WHERE path >= ? AND path < ?", arguments: [k, upperBound(k)])
        if !kept.isEmpty { try insert(db, path, kept) }
    }

    /// The row whose path is a strict ancestor of `path` (at most one: rows never nest).
    private static func ancestorRow(_ db: GRDB.Database, of path: Path) throws -> (Path, String)? {
        let keys = ancestorKeys(path)
        if keys.isEmpty { return nil }
        let marks = Array(repeating: "?", count: keys.count).joined(separator: ",")
        guard let row = try Row.fetchOne(db, sql: "SELECT path, json FROM server_cache WHERE path IN (\(marks))",
                                         arguments: StatementArguments(keys)) else { return nil }
        return (Self.path(fromKey: row["path"]), row["json"])
    }
}
