import EmberCore
import EmberStorage

/// The onDisconnect port of an LMDB store: commands are logged (straight into the store on a
/// single node, through Raft on a cluster member: `submit`), and the bookkeeping this node has
/// applied (`OnDisconnectTable`) is read level by level (one seek per key), so listing sessions
/// never reads their writes.
public struct LMDBOnDisconnect: OnDisconnectPort {
    let store: EmberStore
    let submit: @Sendable (_ operation: OnDisconnectOperation, _ namespace: String, _ auth: WriteAuth) async throws -> WriteResult

    /// `submit`: how an entry reaches the log; nil: this store's own writer.
    public init(store: EmberStore,
                submit: (@Sendable (OnDisconnectOperation, String, WriteAuth) async throws -> WriteResult)? = nil) {
        self.store = store
        self.submit = submit ?? { op, namespace, auth in
            do { return try await store.submit(namespace: namespace, .onDisconnect(op), auth: auth) } catch let e as StorageError {
                throw LMDBTranslation.translate(e)
            }
        }
    }

    public func log(_ command: OnDisconnectCommand, namespace: String, identity: Identity) async throws -> Bool {
        try LMDBTranslation.onDisconnectOutcome(
            try await submit(LMDBTranslation.operation(for: command), namespace, identity.writeAuth))
    }

    public func holders() throws -> [String: String] {
        let node = try store.read(namespace: OnDisconnectTable.namespace, path: OnDisconnectTable.holders).node
        var out: [String: String] = [:]
        for (key, child) in node.children {
            if case .string(let inc)? = child.leaf { out[OnDisconnectTable.node(fromKey: key)] = inc }
        }
        return out
    }

    public func sessions(limit: Int, include: (_ node: String, _ incarnation: String, _ namespace: String?, _ id: String?) -> Bool) throws
        -> [(session: OnDisconnectRef, namespace: String)] {
        let ns = OnDisconnectTable.namespace
        var out: [(session: OnDisconnectRef, namespace: String)] = []
        for nodeKey in try store.shallowKeys(namespace: ns, path: OnDisconnectTable.sessions) {
            let node = OnDisconnectTable.node(fromKey: nodeKey)
            let nodePath = OnDisconnectTable.sessions.child(nodeKey)
            for inc in try store.shallowKeys(namespace: ns, path: nodePath) where include(node, inc, nil, nil) {
                let incPath = nodePath.child(inc)
                for namespace in try store.shallowKeys(namespace: ns, path: incPath) {
                    for id in try store.shallowKeys(namespace: ns, path: incPath.child(namespace)) where include(node, inc, namespace, id) {
                        guard out.count < limit else { return out }
                        out.append((OnDisconnectRef(node: node, incarnation: inc, id: id), namespace))
                    }
                }
            }
        }
        return out
    }
}
