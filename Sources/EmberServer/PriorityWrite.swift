import EmberCore

/// Writing a node's priority alone: REST `PUT /<path>/.priority.json` and the wire protocol's
/// `p` to `<path>/.priority` (reference §1.7). The store has no priority-only operation, so this
/// is a compare-and-set of the whole node on its version, decided at apply time in log order (so
/// it is as atomic on a cluster as on one node) and retried when another write got in between.
enum PriorityWrite {
    /// Named limit: attempts before giving up under constant contention.
    static let maxAttempts = 25

    /// The node path when `raw` (a wire or REST path) addresses a priority (`a/b/.priority`).
    static func target(ofRawPath raw: String) throws -> Path? {
        // Every wire `p` asks and almost none are priority writes: look at the last segment's
        // bytes before splitting anything.
        guard Self.endsWithPrioritySegment(raw) else { return nil }
        var segments = Path.slashSegments(raw).map(String.init)
        guard segments.last == ".priority" else { return nil }
        segments.removeLast()
        return try Path(segments.joined(separator: "/"))
    }

    /// Whether the last non-empty `/`-separated segment of `raw` is `.priority`.
    static func endsWithPrioritySegment(_ raw: String) -> Bool {
        let bytes = raw.utf8
        var end = bytes.endIndex
        while end > bytes.startIndex, bytes[bytes.index(before: end)] == UInt8(ascii: "/") { end = bytes.index(before: end) }
        let suffix = ".priority".utf8
        guard bytes.distance(from: bytes.startIndex, to: end) >= suffix.count else { return false }
        let start = bytes.index(end, offsetBy: -suffix.count)
        guard bytes[start..<end].elementsEqual(suffix) else { return false }
        return start == bytes.startIndex || bytes[bytes.index(before: start)] == UInt8(ascii: "/")
    }

    /// Sets the priority of the node at `path` (null removes it; a server value such as
    /// `{".sv":"timestamp"}` is resolved when applied). An absent node cannot hold a priority
    /// (Firebase drops priorities of empty nodes): nothing is written. Returns the priority now
    /// stored.
    /// `identity` is the writer: the rules judge the whole-node write as theirs when it is applied.
    static func set(_ priority: JSON, at path: Path, namespace: String, identity: Identity, store: NodePorts) async throws -> JSON {
        // The value must be a priority, or a server value that becomes one; checked before any read.
        if ServerValues.containsPlaceholder(priority) {
            guard case .object(let o) = priority, o[".sv"] != nil else {
                throw EmberError.invalidPriority("a priority must be a number, a string or null")
            }
        } else {
            _ = try Priority(json: priority)
        }
        return try await attempt(priority, path, namespace, identity, store)
    }

    private static func attempt(_ priority: JSON, _ path: Path, _ namespace: String, _ identity: Identity,
                                _ store: NodePorts) async throws -> JSON {
        for _ in 0..<maxAttempts {
            await store.reader.visibleReads()
            let current = try store.reader.read(namespace: namespace, path: path)
            if current.node.isEmpty { return .null }
            let data = withPriority(current.node, priority)
            let outcome = try await store.writer.write(
                WriteRequest(namespace: namespace, path: path, kind: .set(data), condition: .version(current.version),
                             identity: identity))
            if outcome.applied { return outcome.value.priority?.json ?? .null }
        }
        throw StoreUnavailable("The priority at \(path) kept changing; \(maxAttempts) attempts failed")
    }

    /// The node in export form with `priority` in place of its own.
    static func withPriority(_ node: Node, _ priority: JSON) -> JSON {
        var obj: KeyMap<JSON>
        switch node.exportJSON() {
        case .object(let o) where node.leaf == nil: obj = o
        case .object(let o): obj = [".value": o[".value"] ?? .null]
        case let leaf: obj = [".value": leaf]
        }
        obj[".priority"] = priority == .null ? nil : priority
        return .object(obj)
    }
}
