import EmberCore
import Foundation
import GRDB

/// Least-recently-used pruning of the server cache (SDK `LRUCachePolicy` and prune forest):
/// past the size limit, tracked queries nobody listens to and nobody keeps synced are forgotten,
/// oldest use first, with their data, until the cache fits. Data at or below a protected path (an
/// active listener's or a keepSynced one) is never dropped.
extension PersistentStore {
    struct PruneResult: Equatable {
        var prunedQueries: [Path] = []
        var sizeBefore = 0
        var sizeAfter = 0
    }

    /// Prunes if the cache is over `limit` bytes. `protected` are the paths the app listens to
    /// now (the store adds the active and keepSynced tracked queries).
    @discardableResult
    func pruneIfNeeded(limit: Int, protected: [Path]) throws -> PruneResult {
        try db.write { db in
            var result = PruneResult()
            var size = try Self.size(db)
            result.sizeBefore = size
            result.sizeAfter = size
            guard size > limit else { return result }
            let kept = protected + (try Self.fetchTracked(db, where: "active = 1 OR keep_synced = 1").map(\.path))
            let candidates = try Self.fetchTracked(db, where: "active = 0 AND keep_synced = 0")
            for query in candidates {
                if size <= limit { break }
                // At or under a protected path the data and its completeness are still needed.
                if kept.contains(where: { $0.contains(query.path) }) { continue }
                try db.execute(sql: "DELETE FROM tracked_query WHERE path = ? AND spec = ?",
                               arguments: [Self.key(query.path), query.spec])
                result.prunedQueries.append(query.path)
                if !query.loadsAllData {
                    // A filtering query's data is its own window.
                    try Self.removeQueryWindow(db, path: query.path, spec: query.spec)
                    size = try Self.size(db)
                    continue
                }
                let keepBelow = kept.filter { query.path.contains($0) }
                try Self.removeData(db, at: query.path, keeping: keepBelow)
                // Queries above lost part of their data; those below (unless kept) lost all of it.
                let above = Self.ancestorKeys(query.path)
                if !above.isEmpty {
                    let marks = Array(repeating: "?", count: above.count).joined(separator: ",")
                    try db.execute(sql: "UPDATE tracked_query SET complete = 0 WHERE path IN (\(marks))",
                                   arguments: StatementArguments(above))
                }
                let below = try Self.fetchTracked(db, where: "1").filter { t in
                    query.path.contains(t.path) && !keepBelow.contains { $0.contains(t.path) }
                }
                for t in below where t.complete {
                    try db.execute(sql: "UPDATE tracked_query SET complete = 0 WHERE path = ? AND spec = ?",
                                   arguments: [Self.key(t.path), t.spec])
                }
                size = try Self.size(db)
            }
            result.sizeAfter = size
            return result
        }
    }
}
