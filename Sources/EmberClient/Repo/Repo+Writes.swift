import EmberCore
import EmberProtocol
import EmberSyncTree
import Foundation

/// Local writes: applied to the sync tree at once (server values estimated with the
/// offset-corrected clock), queued on the connection, then acknowledged or rolled back.
extension Repo {
    typealias WriteCompletion = @Sendable ((any Error)?) -> Void

    /// Resolves server values against the latest local data so local events have an estimate.
    func localNode(_ json: JSON, at path: Path) throws -> Node {
        let existing = syncTree.calcCompleteEventCache(path) ?? .empty
        let resolved = try ServerValues.resolve(json, existing: existing, now: serverTime)
        return try Node(json: resolved, depth: path.count)
    }

    func set(_ json: JSON, at path: Path, completion: WriteCompletion?) {
        queue.async { [self] in
            let node: Node
            do { node = try localNode(json, at: path) } catch {
                if let completion { deliver { completion(DatabaseError.invalid(error)) } }
                return
            }
            let writeID = nextWriteID
            nextWriteID += 1
            // On disk before it goes to the connection: a write the app saw applied survives a kill.
            persistence?.saveWrite(StoredWrite(id: writeID, path: path, kind: .set, data: json, writer: writerID))
            raise(syncTree.applyUserOverwrite(path, node, writeId: writeID))
            // A set overrides transactions running at or below it (SDK: abort with "set").
            abortTransactions(overlapping: path, reason: .set)
            sendWrite("p", path: path, data: json, writeID: writeID, stamp: WriteStamp(writer: writerID, writeID: writeID),
                      completion: completion)
        }
    }

    /// A multi-path update: `parts` are (relative path, value); applied atomically.
    func update(_ parts: [(Path, JSON)], at path: Path, completion: WriteCompletion?) {
        queue.async { [self] in
            if parts.isEmpty {
                if let completion { deliver { completion(nil) } }
                return
            }
            var children: [(Path, Node)] = []
            var wire: KeyMap<JSON> = [:]
            do {
                for (rel, json) in parts {
                    children.append((rel, try localNode(json, at: path.appending(rel))))
                    wire[rel.wireText] = json
                }
            } catch {
                if let completion { deliver { completion(DatabaseError.invalid(error)) } }
                return
            }
            let writeID = nextWriteID
            nextWriteID += 1
            persistence?.saveWrite(StoredWrite(id: writeID, path: path, kind: .merge, data: .object(wire), writer: writerID))
            raise(syncTree.applyUserMerge(path, children, writeId: writeID))
            for (rel, _) in parts { abortTransactions(overlapping: path.appending(rel), reason: .set) }
            sendWrite("m", path: path, data: .object(wire), writeID: writeID, stamp: WriteStamp(writer: writerID, writeID: writeID),
                      completion: completion)
        }
    }

    func sendWrite(_ action: String, path: Path, data: JSON, writeID: Int, stamp: WriteStamp?, completion: WriteCompletion?) {
        connection.submit(.write(action: action, path: path, data: data, hash: nil, stamp: stamp) { [weak self] status, reply in
            guard let self else { return }
            self.queue.async {
                let ok = status == "ok"
                // Acknowledged or rejected, it is no longer outstanding (a rejection is reported
                // to the completion, or logged for a write restored from the last run).
                self.persistence?.writeFinished(id: writeID)
                // A rejected write is rolled back: observers see the server's data again.
                self.raise(self.syncTree.ackUserWrite(writeID, revert: !ok))
                self.rerunTransactionsIfNeeded()
                if let completion {
                    let error: (any Error)? = ok ? nil : DatabaseError.from(status: status, data: reply)
                    self.deliver { completion(error) }
                }
            }
        })
    }

    /// Sets the priority alone. The wire paths cannot name `.priority` (emberd rejects the key),
    /// so this is a compare-and-set of the current value with the new priority: atomic, and
    /// retried like a transaction if the value changes meanwhile.
    func setPriority(_ priority: JSON, at path: Path, completion: WriteCompletion?) {
        var onComplete: (@Sendable ((any Error)?, Bool, DataSnapshot?) -> Void)? = nil
        if let completion { onComplete = { error, _, _ in completion(error) } }
        let update: @Sendable (MutableData) -> TransactionResult = { data in
            data.setPriority(json: priority)
            return TransactionResult.success(withValue: data)
        }
        startTransaction(at: path, update: update, onComplete: onComplete, applyLocally: true)
    }
}
