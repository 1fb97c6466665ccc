import EmberCore

/// `oc` (cancel onDisconnect at a location) with Firebase's semantics: every queued write at or
/// below the location is dropped, and so is that part of writes queued above it. A set above the
/// location is split into sets of its children (JS `sparseSnapshotTreeForget`), so its other
/// children are still written and the cancelled one is left alone. Pure.
enum OnDisconnectCancel {
    static func apply(_ ops: [(Path, WriteRequest.Kind)], cancel: Path) -> [(Path, WriteRequest.Kind)] {
        ops.compactMap { opPath, kind in
            if cancel.contains(opPath) { return nil }
            switch kind {
            case .set(let json):
                guard let rel = opPath.relative(cancel) else { return (opPath, kind) }
                guard let parts = split(.root, json, forgetting: rel) else { return (opPath, kind) }
                return parts.isEmpty ? nil : (opPath, .update(parts))
            case .update(let parts):
                var kept: [(Path, JSON)] = []
                for (p, v) in parts {
                    let absolute = opPath.appending(p)
                    if cancel.contains(absolute) { continue }
                    if let rel = absolute.relative(cancel), let split = split(p, v, forgetting: rel) {
                        kept += split
                    } else {
                        kept.append((p, v))
                    }
                }
                return kept.isEmpty ? nil : (opPath, .update(kept))
            }
        }
    }

    /// The value `json` written at `base`, as writes of its parts without the one at `rel`
    /// (relative to `base`); nil when `json` is a leaf (a leaf's child cannot be cancelled).
    static func split(_ base: Path, _ json: JSON, forgetting rel: Path) -> [(Path, JSON)]? {
        guard let key = rel.first else { return [] }
        var children: [String: JSON]
        switch json {
        case .object(let o): children = o.filter { $0.key != ".priority" && $0.key != ".value" }
        case .array(let a):
            children = [:]
            for (i, v) in a.enumerated() where !v.isNull { children[String(i)] = v }
        default: return nil
        }
        var parts: [(Path, JSON)] = []
        for (k, v) in children where k != key { parts.append((base.child(k), v)) }
        if rel.count > 1, let child = children[key] {
            parts += split(base.child(key), child, forgetting: rel.dropFirst) ?? [(base.child(key), child)]
        }
        return parts.sorted { $0.0 < $1.0 }
    }
}
