import EmberCore

/// Checks every write from outside before it reaches the log (REST and the wire protocol share
/// it): keys, depth, sizes, server values, and the shape of multi-path updates.
struct WriteValidation: Sendable {
    let maxWriteNodes: Int
    let maxUpdateParts: Int

    init(_ config: NodeConfiguration) {
        maxWriteNodes = config.maxWriteNodes
        maxUpdateParts = config.maxUpdateParts
    }

    func validate(_ json: JSON, at path: Path) throws {
        let node = try Node(json: ServerValues.resolve(json, existing: .empty, now: 0), depth: path.count)
        guard node.nodeCount <= maxWriteNodes else {
            throw EmberError.tooLarge("Data to write exceeds the maximum of \(maxWriteNodes) nodes in a single request.")
        }
    }

    /// The parts of a multi-path update at `base`: relative paths in path order, each validated;
    /// overlapping paths ("a" and "a/b") make the result order-dependent and are refused.
    func updateParts(base: Path, _ obj: [String: JSON]) throws -> [(Path, JSON)] {
        guard obj.count <= maxUpdateParts else {
            throw EmberError.tooLarge("Too many paths in one update (limit \(maxUpdateParts))")
        }
        var parts: [(Path, JSON)] = []
        for (k, v) in obj {
            let rel = try Path(k)
            guard !rel.isRoot else { throw EmberError.invalidKey(key: k, reason: "update paths must not be empty") }
            guard base.count + rel.count <= Limits.maxPathDepth else { throw EmberError.pathTooDeep(depth: base.count + rel.count) }
            try validate(v, at: base.appending(rel))
            parts.append((rel, v))
        }
        parts.sort { $0.0 < $1.0 }
        for i in parts.indices.dropFirst() where parts[i - 1].0.contains(parts[i].0) {
            throw EmberError.invalidData("\(parts[i - 1].0) is an ancestor of \(parts[i].0) in the same update")
        }
        return parts
    }
}
