/// One location of a trigger's pattern changed by a committed write.
public struct TriggerChange: Sendable, Equatable {
    public var location: Path
    /// Wildcard name → the key at the location.
    public var params: [String: String]
    /// created, updated or deleted (`written` is what a trigger may ask for instead).
    public var kind: TriggerEventKind
    public var before: Node
    public var after: Node
    /// Firebase's `delta`: what the write put at or below the location, relative to it (null
    /// where it deleted); the whole new value when the write lay at or above the location.
    public var delta: JSON
    /// `delta` is `after`'s JSON (the write lay at or above the location); with
    /// `changes(deltas: false)` it is left null then, for the caller to take from `after`.
    public var deltaIsAfter: Bool

    public init(location: Path, params: [String: String], kind: TriggerEventKind, before: Node, after: Node, delta: JSON,
                deltaIsAfter: Bool = false) {
        self.location = location
        self.params = params
        self.kind = kind
        self.before = before
        self.after = after
        self.delta = delta
        self.deltaIsAfter = deltaIsAfter
    }
}

/// The changes a committed write makes to a trigger's locations: pure, from the write's parts
/// (absolute paths and their new values) and the values before the write at the parts' scopes
/// (`TriggerPattern.scope`), which the apply reads in its transaction before writing.
public enum TriggerChanges {
    /// The distinct paths whose values before the write `changes` needs, in path order (an
    /// update's parts come in the order its client's JSON object happened to list them). Scopes
    /// of one write never nest: two parts of an update never do, and a part above locations is
    /// its own scope, which would contain the other part.
    public static func scopes(_ pattern: TriggerPattern, parts: [Path]) -> [Path] {
        // One part (every set, most updates): at most one scope, and no set of paths to hash.
        if parts.count == 1 { return pattern.scope(of: parts[0]).map { [$0] } ?? [] }
        var out: Set<Path> = []
        for p in parts {
            if let s = pattern.scope(of: p) { out.insert(s) }
        }
        return out.sorted()
    }

    /// Every location whose value changed, in the order of `scopes`, then key order below each
    /// scope: the order of an entry's events, the same on every replica. `before[i]` is the value at `scopes(pattern, parts)[i]` before the write.
    /// `deltas` false: a delta that is the new value's JSON is not built (`deltaIsAfter`; the
    /// apply converts `after` once for both, or stores neither: `TriggerCompactRecord`).
    public static func changes(_ pattern: TriggerPattern, parts: [(Path, Node)], before: [Node], deltas: Bool = true) -> [TriggerChange] {
        let scopes = scopes(pattern, parts: parts.map(\.0))
        precondition(scopes.count == before.count, "one value before the write per scope")
        var out: [TriggerChange] = []
        for (scope, old) in zip(scopes, before) {
            let inside = parts.count == 1 ? scope.relative(parts[0].0).map { [($0, parts[0].1)] } ?? []
                : parts.compactMap { p, n in scope.relative(p).map { ($0, n) } }
            let new = old.updating(inside)
            if scope.count == pattern.count {
                // The write lies at or below this one location.
                guard let params = pattern.match(scope), !old.isIdentical(to: new) else { continue }
                let whole = inside.contains { $0.0.isRoot }
                let delta: JSON = whole ? (deltas ? new.toJSON() : .null) : patch(inside)
                out.append(TriggerChange(location: scope, params: params, kind: kind(old, new), before: old, after: new, delta: delta,
                                         deltaIsAfter: whole))
            } else {
                walk(pattern, at: scope, old, new, deltas: deltas, into: &out)
            }
        }
        return out
    }

    /// Locations below `path` (above the pattern's depth) in either value, in key order.
    static func walk(_ pattern: TriggerPattern, at path: Path, _ old: Node, _ new: Node, deltas: Bool, into out: inout [TriggerChange]) {
        if path.count == pattern.count {
            guard !old.isIdentical(to: new), let params = pattern.match(path) else { return }
            out.append(TriggerChange(location: path, params: params, kind: kind(old, new), before: old, after: new,
                                     delta: deltas ? new.toJSON() : .null, deltaIsAfter: true))
            return
        }
        switch pattern.segments[path.count] {
        case .literal(let k):
            walk(pattern, at: path.child(k), old.child(k), new.child(k), deltas: deltas, into: &out)
        case .wildcard:
            // Leaves have no children: a leaf replaced by an object creates its children.
            // Keys are compared by their bytes (KeyMap), not as Swift strings.
            var keys = Array(old.children.keys)
            for k in new.children.keys where old.children[k] == nil { keys.append(k) }
            for k in keys.sorted(by: KeyOrder.less) {
                walk(pattern, at: path.child(k), old.child(k), new.child(k), deltas: deltas, into: &out)
            }
        }
    }

    static func kind(_ old: Node, _ new: Node) -> TriggerEventKind {
        if old.isEmpty { return .created }
        if new.isEmpty { return .deleted }
        return .updated
    }

    /// The parts below a location as one JSON object (null for a deleted part).
    static func patch(_ parts: [(Path, Node)]) -> JSON {
        var root = JSON.object([:])
        for (rel, node) in parts.sorted(by: { $0.0 < $1.0 }) { set(&root, rel.segments[...], node.isEmpty ? .null : node.toJSON()) }
        return root
    }

    static func set(_ j: inout JSON, _ path: ArraySlice<String>, _ value: JSON) {
        guard let k = path.first else { j = value; return }
        var o = j.objectValue ?? [:]
        var child = o[k] ?? .object([:])
        set(&child, path.dropFirst(), value)
        o[k] = child
        j = .object(o)
    }
}
