import EmberCore
import EmberSyncTree
import Foundation

/// onDisconnect operations: registered with the server, and remembered so that when the
/// connection drops the client shows locally what the server is about to write (JS
/// `repoRunOnDisconnectEvents`).
extension Repo {
    func onDisconnect(_ action: String, at path: Path, data: JSON, completion: WriteCompletion?) {
        connection.submit(.write(action: action, path: path, data: data, hash: nil) { [weak self] status, reply in
            guard let self else { return }
            self.queue.async {
                if status == "ok" { self.rememberOnDisconnect(action, at: path, data: data) }
                guard let completion else { return }
                let error: (any Error)? = status == "ok" ? nil : DatabaseError.from(status: status, data: reply)
                self.deliver { completion(error) }
            }
        })
    }

    private func rememberOnDisconnect(_ action: String, at path: Path, data: JSON) {
        switch action {
        case "o":
            forgetOnDisconnect(at: path)
            onDisconnectSets.append((path, data))
        case "om":
            guard case .object(let parts) = data else { return }
            for (key, value) in parts {
                guard let rel = try? Path(key) else { continue }
                forgetOnDisconnect(at: path.appending(rel))
                onDisconnectSets.append((path.appending(rel), value))
            }
        case "oc":
            forgetOnDisconnect(at: path)
        default:
            break
        }
    }

    /// Drops what was remembered at or below `path`; a set above it is split into sets of its
    /// children without the forgotten one (JS `sparseSnapshotTreeForget`; the server does the same).
    private func forgetOnDisconnect(at path: Path) {
        var kept: [(path: Path, data: JSON)] = []
        for entry in onDisconnectSets where !path.contains(entry.path) {
            if let rel = entry.path.relative(path), let parts = Self.split(entry.path, entry.data, forgetting: rel) {
                kept += parts.map { (path: $0.0, data: $0.1) }
            } else {
                kept.append(entry)
            }
        }
        onDisconnectSets = kept
    }

    /// `json` set at `base` as sets of its parts without the one at `rel`; nil for a leaf.
    private static func split(_ base: Path, _ json: JSON, forgetting rel: Path) -> [(Path, JSON)]? {
        guard let key = rel.first else { return [] }
        var children: KeyMap<JSON> = [:]
        switch json {
        case .object(let o): children = o.filter { $0.key != ".priority" && $0.key != ".value" }
        case .array(let a): for (i, v) in a.enumerated() where !v.isNull { children[String(i)] = v }
        default: return nil
        }
        var parts: [(Path, JSON)] = []
        for (k, v) in children where k != key { parts.append((base.child(k), v)) }
        if rel.count > 1, let child = children[key] {
            parts += split(base.child(key), child, forgetting: rel.dropFirst) ?? [(base.child(key), child)]
        }
        return parts
    }

    /// The connection dropped: apply the remembered operations as server data, then forget them.
    func runOnDisconnectLocally() {
        let sets = onDisconnectSets
        onDisconnectSets = []
        var events: [Event] = []
        for (path, json) in sets {
            let existing = syncTree.calcCompleteEventCache(path) ?? .empty
            guard let resolved = try? ServerValues.resolve(json, existing: existing, now: serverTime),
                  let node = try? Node(json: resolved, depth: path.count) else { continue }
            events += syncTree.applyServerOverwrite(path, node)
        }
        raise(events)
        rerunTransactionsIfNeeded()
    }
}
