import EmberCore
import EmberSyncTree
import Foundation

/// Persistence at start-up: the sync tree reads the disk cache for new views, and the writes
/// queued in the last run are applied locally (their events fire for observers added later, as
/// the views are built on top of them) and sent again, in their original order, before any new
/// write. As in the SDK, completion blocks do not survive a restart: a restored write completes
/// silently, and a rejection of one is logged.
///
/// A write leaves the disk queue when its acknowledgement is processed, so it is sent once per
/// run until then (as in the SDK). If the app dies after the server applied a write but before
/// the acknowledgement reached the disk, the write is sent again at the next start — with the
/// stamp it was first sent with (writer id of that run, write id), and Ember's log answers it
/// without applying it again (exactly once; the SDK against Firebase applies it twice). Writes
/// queued by a version without stamps are sent unstamped (at least once).
extension Repo {
    /// Called once, at the database's first use and before the work of that use is queued: the
    /// restored writes go out before any new one, and views see the cache from the first.
    func attachPersistence(_ manager: PersistenceManager) {
        queue.async { [self] in
            precondition(persistence == nil, "persistence is attached once")
            persistence = manager
            startPersistence()
        }
    }

    private func startPersistence() {
        guard let persistence else { return }
        syncTree.serverCacheSource = persistence
        // Called on `queue` (from the manager, itself confined to it).
        persistence.protectedPaths = { [unowned self] in
            registrations.values.filter { !$0.isInfo }.map(\.query.path)
        }
        let writes = persistence.restoredWrites()
        if !writes.isEmpty {
            persistence.logger.info("ember persistence: sending \(writes.count) write(s) queued in an earlier run")
        }
        for (index, write) in writes.enumerated() {
            nextWriteID = max(nextWriteID, write.id + 1)
            if index < PersistenceLimits.maxLoggedRestoredWrites {
                persistence.logger.debug("ember persistence: restored write \(write.id) \(write.kind.rawValue) \(write.path)")
            }
            do {
                try restore(write)
            } catch {
                // Not silently: the write is dropped only with an error in the log.
                persistence.logger.error("ember persistence: queued write \(write.id) to \(write.path) is invalid and is dropped: \(error)")
                persistence.writeFinished(id: write.id)
            }
        }
    }

    private func restore(_ write: StoredWrite) throws {
        let id = write.id
        let onFinish: WriteCompletion = { [weak self] error in
            guard let error, let self else { return }
            self.persistence?.logger.error("ember persistence: the server rejected write \(id) to \(write.path) queued in an earlier run: \(error)")
        }
        let stamp = write.writer.map { WriteStamp(writer: $0, writeID: id) }
        switch write.kind {
        case .set:
            let node = try localNode(write.data, at: write.path)
            raise(syncTree.applyUserOverwrite(write.path, node, writeId: id))
            sendWrite("p", path: write.path, data: write.data, writeID: id, stamp: stamp, completion: onFinish)
        case .merge:
            guard case .object(let wire) = write.data else { throw PersistentStore.StoreError.corrupt("merge data is not an object") }
            var children: [(Path, Node)] = []
            for (key, json) in wire {
                let rel = try Path(key)
                children.append((rel, try localNode(json, at: write.path.appending(rel))))
            }
            raise(syncTree.applyUserMerge(write.path, children, writeId: id))
            sendWrite("m", path: write.path, data: write.data, writeID: id, stamp: stamp, completion: onFinish)
        }
    }
}
