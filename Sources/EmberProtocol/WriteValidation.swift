import EmberCore

/// The front's checks of a write from outside, before it reaches the store (REST and the wire
/// protocol share it). The full check of the data (keys, depth, sizes, server values, storage key
/// length) runs once, in `EmberStore.validate`, which every write passes before it is logged; the
/// front only adds its own limits that the store does not know (nodes per write, parts per update)
/// and parses the shape of multi-path updates. Writes that are kept for later (onDisconnect) use
/// `validateFully`, because they reach the store only when the connection ends.
public struct WriteValidation: Sendable {
    /// Named limit: nodes one write may make.
    public let maxWriteNodes: Int
    /// Named limit: paths in one multi-path update.
    public let maxUpdateParts: Int

    public init(maxWriteNodes: Int, maxUpdateParts: Int) {
        self.maxWriteNodes = maxWriteNodes
        self.maxUpdateParts = maxUpdateParts
    }

    /// The front's limits only: one walk over the JSON, no allocation.
    public func validate(_ json: JSON, at path: Path) throws {
        var budget = maxWriteNodes
        guard Self.countNodes(json, budget: &budget) else {
            throw EmberError.tooLarge("Data to write exceeds the maximum of \(maxWriteNodes) nodes in a single request.")
        }
    }

    /// Everything the store would check, now (for writes stored until a connection ends).
    public func validateFully(_ json: JSON, at path: Path) throws {
        let node = try Node(json: ServerValues.resolve(json, existing: .empty, now: 0), depth: path.count)
        guard node.nodeCount <= maxWriteNodes else {
            throw EmberError.tooLarge("Data to write exceeds the maximum of \(maxWriteNodes) nodes in a single request.")
        }
    }

    /// Counts the nodes the JSON will make (nulls make none, a server value makes one leaf,
    /// `.priority` is not a node), spending `budget`; false as soon as it runs out.
    public static func countNodes(_ json: JSON, budget: inout Int) -> Bool {
        switch json {
        case .null: return true
        case .bool, .int, .double, .string:
            budget -= 1
            return budget >= 0
        case .array(let a):
            budget -= 1
            if budget < 0 { return false }
            for e in a where !countNodes(e, budget: &budget) { return false }
            return true
        case .object(let o):
            // The members counted in the same look that finds a key starting with "." (most
            // objects have none; a separate scan for one was a fifth of this walk in an import).
            // One found (or the budget spent where one may follow): the object is counted again
            // from the start by the rules for those keys, so the answer is the same either way.
            let before = budget
            var plain = true
            for (k, v) in o {
                if k.utf8.first == UInt8(ascii: ".") { plain = false; break }
                if !countNodes(v, budget: &budget) {
                    if !Node.hasDotKey(o) { return false }
                    plain = false
                    break
                }
            }
            if plain {
                budget -= 1
                return budget >= 0
            }
            budget = before
            if o[".sv"] != nil { budget -= 1; return budget >= 0 }
            if let v = o[".value"] { return countNodes(v, budget: &budget) }
            budget -= 1
            if budget < 0 { return false }
            for (k, v) in o where k != ".priority" && !countNodes(v, budget: &budget) { return false }
            return true
        }
    }

    /// The parts of a multi-path update at `base`: relative paths in path order, each within the
    /// front's limits (`full`: every check, for onDisconnect); overlapping paths ("a" and "a/b")
    /// make the result order-dependent and are refused.
    public func updateParts(base: Path, _ obj: KeyMap<JSON>, full: Bool = false) throws -> [(Path, JSON)] {
        guard obj.count <= maxUpdateParts else {
            throw EmberError.tooLarge("Too many paths in one update (limit \(maxUpdateParts))")
        }
        var parts: [(Path, JSON)] = []
        parts.reserveCapacity(obj.count)
        for (k, v) in obj {
            let rel = try Path(k)
            guard !rel.isRoot else { throw EmberError.invalidKey(key: k, reason: "update paths must not be empty") }
            guard base.count + rel.count <= Limits.maxPathDepth else { throw EmberError.pathTooDeep(depth: base.count + rel.count) }
            if full { try validateFully(v, at: base.appending(rel)) } else { try validate(v, at: base.appending(rel)) }
            parts.append((rel, v))
        }
        // By each path's sort key, made once: comparing paths key by key (`Path.<`) parsed both
        // keys at every comparison, half of this function's time in a bulk import.
        parts = parts.map { (key: $0.0.sortKey, part: $0) }
            .sorted { $0.key.lexicographicallyPrecedes($1.key) }
            .map(\.part)
        for i in parts.indices.dropFirst() where parts[i - 1].0.contains(parts[i].0) {
            throw EmberError.invalidData("\(parts[i - 1].0) is an ancestor of \(parts[i].0) in the same update")
        }
        return parts
    }
}
