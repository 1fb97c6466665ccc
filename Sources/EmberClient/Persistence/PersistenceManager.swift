import EmberCore
import EmberSyncTree
import Foundation
import GRDB
import Logging

/// The Repo's view of the disk cache (SDK `FPersistenceManager`): turns sync events into store
/// calls and store failures into log lines. A failing disk never stops the app: the data stays
/// in memory for this run, and a lost queued write is always logged as an error.
/// Confined to the Repo's queue (handed to it once, hence `@unchecked Sendable`).
final class PersistenceManager: ServerCacheSource, @unchecked Sendable {
    let store: PersistentStore
    let cacheSizeBytes: Int
    let logger: Logger
    /// Paths the app listens to right now (asked at prune time, so their data is never dropped).
    var protectedPaths: () -> [Path] = { [] }
    /// Server cache writes since the last size check; the size is checked every so many.
    private var writesSinceSizeCheck = 0
    private var reportedOverLimit = false
    static let sizeCheckInterval = 16

    init(store: PersistentStore, cacheSizeBytes: Int, logger: Logger) {
        self.store = store
        self.cacheSizeBytes = cacheSizeBytes
        self.logger = logger
    }

    /// Opens the store for `databaseURL` under `settings`; nil (logged) when no file can be used.
    static func open(databaseURL: String, settings: PersistenceSettings) -> PersistenceManager? {
        var logger = Logger(label: "ember.client.persistence")
        logger[metadataKey: "database"] = .string(databaseURL)
        let dir = settings.directory ?? PersistenceSettings.defaultDirectory
        let file = dir.appendingPathComponent(PersistenceSettings.fileName(forDatabaseURL: databaseURL))
        guard let store = PersistentStore.openRecovering(file: file, logger: logger) else { return nil }
        return PersistenceManager(store: store, cacheSizeBytes: settings.cacheSizeBytes, logger: logger)
    }

    // MARK: - ServerCacheSource

    func completeServerCache(for query: SyncQuery) -> Node? {
        attempt("read the cache at \(query.path)") {
            if try store.isComplete(at: query.path), let node = try store.serverCache(at: query.path) { return node }
            // A filtering query without whole data above it: its own last window.
            if !query.spec.loadsAllData { return try store.completeQueryWindow(query) }
            return nil
        } ?? nil
    }

    // MARK: - Server data

    func serverOverwrite(_ path: Path, _ node: Node) {
        attempt("cache server data at \(path)") { try store.overwriteServerCache(at: path, with: node) }
        afterCacheWrite()
    }

    func serverMerge(_ path: Path, _ children: [(Path, Node)]) {
        attempt("cache server data at \(path)") { try store.mergeServerCache(at: path, children) }
        afterCacheWrite()
    }

    /// A getData answer, kept as the SDK keeps it: whole data at the path for a query that loads
    /// all data, else the query's window; either way complete, so a later offline read or
    /// listener finds it. Pruned like any inactive query.
    func readAnswered(_ query: SyncQuery, _ node: Node) {
        attempt("cache the answer at \(query.path)") {
            if query.spec.loadsAllData {
                try store.overwriteServerCache(at: query.path, with: node)
            } else {
                try store.saveQueryWindow(query, node)
            }
            try store.trackAnsweredRead(query)
        }
        afterCacheWrite()
    }

    /// A filtering query's window after the server changed it.
    func queryWindow(_ query: SyncQuery, _ node: Node) {
        attempt("cache the window of \(query)") { try store.saveQueryWindow(query, node) }
        afterCacheWrite()
    }

    private func afterCacheWrite() {
        writesSinceSizeCheck += 1
        if writesSinceSizeCheck >= Self.sizeCheckInterval { pruneIfNeeded() }
    }

    /// Checks the size now and prunes if it is over the limit.
    func pruneIfNeeded() {
        writesSinceSizeCheck = 0
        let protected = protectedPaths()
        guard let result = attempt("prune the cache", { try store.pruneIfNeeded(limit: cacheSizeBytes, protected: protected) })
        else { return }
        if !result.prunedQueries.isEmpty {
            logger.debug("ember persistence: pruned \(result.prunedQueries.count) queries, \(result.sizeBefore) → \(result.sizeAfter) bytes")
        }
        // Said once each time the cache goes over, not at every check while it stays there.
        let over = result.sizeAfter > cacheSizeBytes
        if over && !reportedOverLimit {
            logger.info("ember persistence: cache holds \(result.sizeAfter) bytes, over \(cacheSizeBytes), all of it listened to or kept synced")
        }
        reportedOverLimit = over
    }

    // MARK: - Tracked queries

    func listenStarted(_ query: SyncQuery) { attempt("track \(query)") { try store.touchQuery(query, active: true) } }

    func listenStopped(_ query: SyncQuery) {
        attempt("track \(query)") { try store.touchQuery(query, active: false) }
        // Data nobody listens to is what pruning may drop; see whether it must now.
        pruneIfNeeded()
    }

    func listenComplete(_ query: SyncQuery) { attempt("track \(query)") { try store.setQueryComplete(query) } }

    func keepSynced(_ query: SyncQuery, _ on: Bool) {
        attempt("keep \(query) synced") { try store.setKeepSynced(query.forListening, on) }
    }

    // MARK: - Writes

    /// Queued writes from the last run, oldest first; unreadable ones are logged as lost.
    func restoredWrites() -> [StoredWrite] {
        attempt("read the queued writes (they are lost)") { try store.writes() } ?? []
    }

    func saveWrite(_ write: StoredWrite) {
        attempt("save the write to \(write.path) (it will be lost if the app stops before it is sent)") {
            try store.saveWrite(write)
        }
    }

    func writeFinished(id: Int) {
        // Failing here means a resend after the next start; logged so it can be explained.
        attempt("remove acknowledged write \(id) (it may be sent again after a restart)") { try store.removeWrite(id: id) }
    }

    /// Set when the file turned out damaged while in use: the store is left alone for the rest of
    /// the run (the next start checks the file and replaces it).
    private(set) var isBroken = false

    /// Runs a store call; failures are logged as errors and yield nil.
    @discardableResult
    private func attempt<T>(_ what: String, _ body: () throws -> T) -> T? {
        guard !isBroken else {
            if what.hasPrefix("save the write") {
                logger.error("ember persistence: the cache is off after damage; could not \(what)")
            }
            return nil
        }
        do { return try body() } catch {
            logger.error("ember persistence: could not \(what): \(error)")
            if let db = error as? GRDB.DatabaseError, db.resultCode == .SQLITE_CORRUPT || db.resultCode == .SQLITE_NOTADB {
                isBroken = true
                logger.error("""
                    ember persistence: \(store.file.path) is damaged; the disk cache is off for this run \
                    (data stays in memory), writes made from now on are not kept on disk, and the file \
                    is checked and replaced at the next start
                    """)
            }
            return nil
        }
    }
}
