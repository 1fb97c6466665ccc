import EmberCore

/// How a committed change looks from one listened location: Firebase streaming events
/// (`put` replaces at a relative path, `patch` replaces several children), reference §1.8.
public enum StreamEvent: Sendable, Equatable {
    case put(path: Path, data: Node)
    case patch(path: Path, data: [(Path, Node)])

    public static func == (a: StreamEvent, b: StreamEvent) -> Bool {
        switch (a, b) {
        case let (.put(p1, d1), .put(p2, d2)): return p1 == p2 && d1 == d2
        case let (.patch(p1, d1), .patch(p2, d2)):
            return p1 == p2 && d1.count == d2.count && zip(d1, d2).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }
}

public enum ChangeRouting {
    /// The events a listener at `location` receives for `change` (empty when unrelated).
    public static func events(for change: CommittedChange, at location: Path) -> [StreamEvent] {
        let base = change.path
        switch change.kind {
        case .set(let node):
            if let rel = location.relative(base) { return [.put(path: rel, data: node)] }
            if let rel = base.relative(location) { return [.put(path: .root, data: node.child(at: rel))] }
            return []
        case .merge(let parts):
            if let rel = location.relative(base) { return [.patch(path: rel, data: parts)] }
            guard let below = base.relative(location) else { return [] }
            // The listener is under the merge's base: each part is a put, or unrelated.
            var out: [StreamEvent] = []
            for (relPart, node) in parts {
                if let r = relPart.relative(below) {
                    out.append(.put(path: .root, data: node.child(at: r)))
                } else if let r = below.relative(relPart) {
                    out.append(.put(path: r, data: node))
                }
            }
            return out
        }
    }

    /// SSE wire text of one event: `event: <name>\ndata: {"path":...,"data":...}\n\n`.
    public static func sseText(_ event: StreamEvent) -> String {
        switch event {
        case .put(let path, let data):
            return "event: put\ndata: " + JSON.object(["path": .string(path.description), "data": data.toJSON()]).serialized() + "\n\n"
        case .patch(let path, let parts):
            var obj: KeyMap<JSON> = [:]
            for (p, n) in parts { obj[p.segments.joined(separator: "/")] = n.toJSON() }
            return "event: patch\ndata: " + JSON.object(["path": .string(path.description), "data": .object(obj)]).serialized() + "\n\n"
        }
    }

    /// A `put` of the whole location around its JSON streamed in between (`sseText`'s bytes:
    /// the object's members in key order, "data" before "path"), for a first event that is
    /// written as the store walks its snapshot.
    public static let rootPutHead = "event: put\ndata: {\"data\":"
    public static let rootPutTail = ",\"path\":\"/\"}\n\n"

    public static let keepAliveText = "event: keep-alive\ndata: null\n\n"
    /// The stream's token expired. firebase-admin compares the raw data line to exactly this
    /// text and reconnects with a fresh credential.
    public static let authRevokedText = "event: auth_revoked\ndata: credential is no longer valid\n\n"
}
