import EmberCore
import EmberRules

/// The data rules look at, read on demand from one transaction: `exists` and `hasChildren` are
/// one cursor seek and `getPriority`/`isString` one point read, whatever the size of the subtree;
/// only `val()` and `.validate` walks below a write read a subtree. Read failures make the data
/// look absent to the evaluator and are kept in `failure` for the caller to throw.
final class StoredRulesData: RulesDataSource {
    let tables: Tables
    let t: Txn
    let ns: String
    private(set) var failure: Error?

    init(tables: Tables, t: Txn, ns: String) {
        self.tables = tables
        self.t = t
        self.ns = ns
    }

    private func key(_ path: Path) -> [UInt8] { Tables.treeKey(ns, path) }

    private func attempt<T>(_ fallback: T, _ body: () throws -> T) -> T {
        guard failure == nil else { return fallback }
        do { return try body() } catch {
            failure = error
            return fallback
        }
    }

    func node(at path: Path) -> Node {
        let k = key(path)
        return attempt(.empty) { try tables.readNode(t, key: k) }
    }

    func shallow(at path: Path) -> (leaf: Leaf?, priority: Priority?) {
        let k = key(path)
        return attempt((nil, nil)) {
            guard let v = try t.get(tables.treeS, k) else {
                // A child of an inline object has no record of its own.
                let n = try tables.inlineLeaf(t, key: k)
                return (n?.leaf, n?.priority)
            }
            switch try TreeRecord.decode(v) {
            case .leaf(let l, let p): return (l, p)
            case .priority(let p): return (nil, p)
            case .inline(let o): return (nil, o.priority)
            }
        }
    }

    func exists(at path: Path) -> Bool {
        let k = key(path)
        return attempt(false) { try tables.exists(t, key: k) }
    }

    func hasChildren(at path: Path) -> Bool {
        let k = key(path)
        return attempt(false) {
            var c = try t.cursor(tables.treeS, within: k, keysOnly: true)
            defer { c.close() }
            if let found = try c.seekKey(k + [0x01]), found.starts(with: k), found.count > k.count { return true }
            // An inline object has children (at least one) in its own record.
            return try t.get(tables.treeS, k)?.first == InlineObject.tag
        }
    }
}

extension EmberStore {
    /// Runs `body` with a namespace's data as rules read it: on demand, from one read snapshot
    /// (reads judged at the serving node, and dry runs of writes).
    public func withRulesData<T>(namespace: String, _ body: (any RulesDataSource) throws -> T) throws -> T {
        try KeyCodec.validateNamespace(namespace)
        return try withVisibleRead { t in
            let data = StoredRulesData(tables: tables, t: t, ns: namespace)
            let result = try body(data)
            if let failure = data.failure { throw failure }
            return result
        }
    }
}
