/// Which of a namespace's trigger patterns a write can touch, found without trying each: the
/// patterns are indexed by their first key (`/messages/{id}` under `messages`), so a write
/// below `/orders` looks at the patterns under `orders` and those starting with a wildcard,
/// not at every pattern of the namespace. Production namespaces put their triggers on
/// different top-level lists (messages, orders, users, ...), and each replica's apply asked
/// every one of them about every write. A write at the root can touch any pattern.
/// The candidates are a superset: each is still checked (`TriggerPattern.scope`).
public struct TriggerPatternIndex: Sendable, Equatable {
    /// First literal key → the plans (indexes into `TriggerSet.plan`) starting with it.
    let byFirstKey: [String: [Int]]
    /// Plans whose first segment is a wildcard, or that have none (the pattern `/`).
    let unkeyed: [Int]
    let count: Int
    /// The only plan of a one-pattern set (made once, not per write).
    static let first = [0]

    public init(_ patterns: [TriggerPattern]) {
        var keyed: [String: [Int]] = [:]
        var unkeyed: [Int] = []
        for (i, p) in patterns.enumerated() {
            if case .literal(let k)? = p.segments.first { keyed[k, default: []].append(i) } else { unkeyed.append(i) }
        }
        byFirstKey = keyed
        self.unkeyed = unkeyed
        count = patterns.count
    }

    /// The plans a write at `path` (absolute) may touch, in plan order, each once.
    ///
    /// One path below a first key (every set, most updates) with no pattern starting with a
    /// wildcard: the plans stored under that key, as they are (no array made per write: with
    /// triggers on ten lists, two per write on every replica were most of what the nine
    /// definitions a write does not match still cost).
    public func candidates(of path: Path) -> [Int] {
        if count <= 1 { return count == 1 ? Self.first : [] }
        if unkeyed.isEmpty, let first = path.segments.first { return byFirstKey[first] ?? [] }
        return candidates([path])
    }

    /// The plans a write of `paths` may touch (`candidates(of:)` for each, merged in plan order).
    public func candidates(_ paths: [Path]) -> [Int] {
        if count <= 1 { return count == 1 ? Self.first : [] }
        if paths.count == 1, unkeyed.isEmpty, let first = paths[0].segments.first { return byFirstKey[first] ?? [] }
        var hit = [Bool](repeating: false, count: count)
        for i in unkeyed { hit[i] = true }
        for p in paths {
            guard let first = p.segments.first else { return Array(0..<count) }
            // String equality is wider than the patterns' byte-exact keys: a superset, never a miss.
            for i in byFirstKey[first] ?? [] { hit[i] = true }
        }
        return hit.indices.filter { hit[$0] }
    }
}
