import EmberCore
import EmberRules

/// The rules refused a read or a write. REST 401 `Permission denied`; wire `permission_denied`.
/// Read decisions at the node that serves the read, by the rules in force for the namespace
/// (stored through the log, else the node's default). Writes are judged in the store, at apply.
struct RulesGate: Sendable {
    let reader: any ReadPort
    let rules: any RulesPort
    let defaults: RulesDocument

    init(store: NodePorts, defaults: RulesDocument) {
        reader = store.reader
        rules = store.rules
        self.defaults = defaults
    }

    func engine(_ ns: String) -> RulesEngine {
        rules.storedRules(namespace: ns)?.engine ?? defaults.engine
    }

    /// The rules text in force (what `GET /.settings/rules.json` answers).
    func text(_ ns: String) -> String {
        rules.storedRules(namespace: ns)?.text ?? defaults.text
    }

    func hasIndex(_ ns: String, at path: Path, named index: String) -> Bool {
        engine(ns).hasIndex(at: path, named: index)
    }

    /// Admins pass; constant rules decide without data; otherwise data is read from one snapshot
    /// only as far as the rules look (`exists()`/`hasChildren()` are one seek, `val()` a subtree).
    func canRead(_ ns: String, _ path: Path, _ identity: Identity, query: QuerySpec?, now: Int64) throws -> Bool {
        if identity.isAdmin { return true }
        let e = engine(ns)
        if let verdict = e.readVerdictWithoutEvaluation(at: path) { return verdict }
        return try reader.withRulesData(namespace: ns) { data in
            e.canRead(path: path, auth: identity.authVariable, data: data, now: now, query: query)
        }
    }

    /// Dry run of a write against the current state: onDisconnect operations are checked when
    /// registered (Firebase answers permission_denied then); they are judged again when they run.
    func canWrite(_ ns: String, _ path: Path, _ kind: WriteRequest.Kind, _ identity: Identity, now: Int64) throws -> Bool {
        if identity.isAdmin { return true }
        let e = engine(ns)
        if e.grantsEveryWrite { return true }
        let parts: [(Path, JSON)]
        switch kind {
        case .set(let j): parts = [(.root, j)]
        case .update(let p): parts = p
        case .updateText(let text, _): parts = try text.json()
        }
        let isUpdate: Bool
        if case .set = kind { isUpdate = false } else { isUpdate = true }
        let paths = isUpdate ? parts.map { path.appending($0.0) } : [path]
        if e.writeGrantedWithoutEvaluation(at: paths) { return true }
        let auth = identity.authVariable
        return try reader.withRulesData(namespace: ns) { data in
            var nodes: [(Path, Node)] = []
            for (rel, j) in parts {
                let at = path.appending(rel)
                let resolved = ServerValues.containsPlaceholder(j) ? try ServerValues.resolve(j, existing: data.node(at: at), now: now) : j
                nodes.append((rel, try Node(json: resolved, depth: at.count)))
            }
            if isUpdate { return e.canUpdate(path: path, parts: nodes, auth: auth, data: data, now: now) }
            return e.canWrite(path: path, newValue: nodes[0].1, auth: auth, data: data, now: now)
        }
    }

    func requireRead(_ ns: String, _ path: Path, _ identity: Identity, query: QuerySpec?, now: Int64) throws {
        guard try canRead(ns, path, identity, query: query, now: now) else { throw PermissionDenied() }
    }
}
