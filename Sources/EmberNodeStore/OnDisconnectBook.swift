import EmberCore
import EmberStorage

/// Reads the onDisconnect bookkeeping a node has applied (`OnDisconnectTable`): which
/// incarnation holds each node's sessions, and which sessions have writes pending. Level by
/// level (one seek per key), so listing sessions never reads their writes.
public struct OnDisconnectBook: Sendable {
    let store: EmberStore

    public init(store: EmberStore) { self.store = store }

    /// Node id → the incarnation holding its sessions.
    public func holders() throws -> [String: String] {
        let node = try store.read(namespace: OnDisconnectTable.namespace, path: OnDisconnectTable.holders).node
        var out: [String: String] = [:]
        for (key, child) in node.children {
            if case .string(let inc)? = child.leaf { out[OnDisconnectTable.node(fromKey: key)] = inc }
        }
        return out
    }

    /// Sessions with pending writes that pass `include` (asked first with the session's node and
    /// incarnation alone, `id` nil, to skip a whole incarnation), with their namespaces; at most
    /// `limit`.
    public func sessions(limit: Int, include: (_ node: String, _ incarnation: String, _ namespace: String?, _ id: String?) -> Bool) throws
        -> [(session: OnDisconnectSession, namespace: String)] {
        let ns = OnDisconnectTable.namespace
        var out: [(session: OnDisconnectSession, namespace: String)] = []
        for nodeKey in try store.shallowKeys(namespace: ns, path: OnDisconnectTable.sessions) {
            let node = OnDisconnectTable.node(fromKey: nodeKey)
            let nodePath = OnDisconnectTable.sessions.child(nodeKey)
            for inc in try store.shallowKeys(namespace: ns, path: nodePath) where include(node, inc, nil, nil) {
                let incPath = nodePath.child(inc)
                for namespace in try store.shallowKeys(namespace: ns, path: incPath) {
                    for id in try store.shallowKeys(namespace: ns, path: incPath.child(namespace)) where include(node, inc, namespace, id) {
                        guard out.count < limit else { return out }
                        out.append((OnDisconnectSession(node: node, incarnation: inc, id: id), namespace))
                    }
                }
            }
        }
        return out
    }

    /// The writes `session` has pending (what a `run` would apply now), in registration order.
    public func writes(of session: OnDisconnectSession, namespace: String) throws -> [WriteOperation] {
        try pending(of: session, namespace: namespace).map(\.operation)
    }

    func pending(of session: OnDisconnectSession, namespace: String) throws -> [EmberStorage.LogEntry] {
        let path = OnDisconnectTable.sessionPath(session, namespace: namespace)
        let node = try store.read(namespace: OnDisconnectTable.namespace, path: path).node
        return try node.children.keys.sorted().map { try OnDisconnectTable.decodeStoredWrite(node.child($0)) }
    }
}
