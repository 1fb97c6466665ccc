import EmberCore
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
                if let completion { deliver { completion(error) } }
                return
            }
            let writeID = nextWriteID
            nextWriteID += 1
            raise(syncTree.applyUserOverwrite(path, node, writeId: writeID))
            // A set overrides transactions running at or below it (SDK: abort with "set").
            abortTransactions(overlapping: path, reason: .set)
            sendWrite("p", path: path, data: json, writeID: writeID, completion: completion)
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
            var wire: [String: JSON] = [:]
            do {
                for (rel, json) in parts {
                    children.append((rel, try localNode(json, at: path.appending(rel))))
                    wire[ClientMessage.wirePath(rel)] = json
                }
            } catch {
                if let completion { deliver { completion(error) } }
                return
            }
            let writeID = nextWriteID
            nextWriteID += 1
            raise(syncTree.applyUserMerge(path, children, writeId: writeID))
            for (rel, _) in parts { abortTransactions(overlapping: path.appending(rel), reason: .set) }
            sendWrite("m", path: path, data: .object(wire), writeID: writeID, completion: completion)
        }
    }

    private func sendWrite(_ action: String, path: Path, data: JSON, writeID: Int, completion: WriteCompletion?) {
        connection.submit(.write(action: action, path: path, data: data, hash: nil) { [weak self] status, reply in
            guard let self else { return }
            self.queue.async {
                let ok = status == "ok"
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

    /// Sets the priority alone. The server's paths cannot name `.priority`, so the value is
    /// rewritten with the new priority from the latest known data (fetched first when unknown).
    func setPriority(_ priority: JSON, at path: Path, completion: WriteCompletion?) {
        queue.async { [self] in
            if let current = syncTree.calcCompleteEventCache(path) {
                set(Self.withPriority(current, priority), at: path, completion: completion)
                return
            }
            get(SyncQuery(path: path)) { [weak self] result in
                guard let self else { return }
                switch result {
                case .success(let node): self.set(Self.withPriority(node, priority), at: path, completion: completion)
                case .failure(let error): completion?(error)
                }
            }
        }
    }

    static func withPriority(_ node: Node, _ priority: JSON) -> JSON {
        let value = node.exportJSON()
        if case .object(var o) = value, o[".value"] == nil {
            o[".priority"] = priority
            return .object(o)
        }
        let leaf = node.leaf?.json ?? .null
        return .object([".value": leaf, ".priority": priority])
    }
}
