import EmberCore

/// A compiled Firebase Realtime Database rules document, answering read/set/update questions.
/// Pure: `auth`, `now` and the data are inputs. Admin bypass is the caller's job.
public struct RulesEngine: Sendable {
    let rootRule: RuleNode
    public let limits: RulesLimits
    /// `.indexOn` per location pattern (wildcards appear as their `$name`).
    public let indexDefinitions: [(pattern: [String], indexes: [String])]

    /// Parses and type-checks `text`; a bad document is refused with the line and the reason.
    public init(text: String, limits: RulesLimits = .default) throws(RulesError) {
        self.limits = limits
        rootRule = try RulesLoader(limits: limits).load(text)
        indexDefinitions = rootRule.indexDefinitions(prefix: [])
    }

    /// Whether `.indexOn` at a location matching `path` names `index` (`.value` for $value).
    public func hasIndex(at path: Path, named index: String) -> Bool {
        indexDefinitions.contains { def in
            def.pattern.count == path.count
                && zip(def.pattern, path.segments).allSatisfy { $0.hasPrefix("$") || $0 == $1 }
                && def.indexes.contains(index)
        }
    }

    /// Read of `path`: granted by a true `.read` at the path or any ancestor. `query` is the
    /// client's query, if any, for rules that bound queries (`query.limitToFirst <= 100`).
    public func canRead(path: Path, auth: JSON?, root: Node, now: Int64, query: QuerySpec? = nil) -> Bool {
        var op = Operation(engine: self, auth: auth, oldRoot: root, newRoot: nil, now: now)
        op.query = RulesEngine.queryValue(query)
        return op.granted(.read, at: path)
    }

    /// Set of `newValue` at `path` (a delete when empty): `.write` grant, then `.validate`.
    public func canWrite(path: Path, newValue: Node, auth: JSON?, root: Node, now: Int64) -> Bool {
        let newRoot = root.setting(newValue, at: path)
        var op = Operation(engine: self, auth: auth, oldRoot: root, newRoot: newRoot, now: now)
        return op.granted(.write, at: path) && op.validates()
    }

    /// Multi-path update at `path` (`parts` relative to it), all or nothing: every part needs a
    /// `.write` grant (with `newData` from the combined result), and the result must validate.
    public func canUpdate(path: Path, parts: [(Path, Node)], auth: JSON?, root: Node, now: Int64) -> Bool {
        let absolute = parts.map { (path.appending($0.0), $0.1) }
        // Overlapping parts make the result order-dependent; the write validation refuses them.
        let sorted = absolute.map(\.0).sorted()
        precondition(zip(sorted, sorted.dropFirst()).allSatisfy { !$0.contains($1) }, "overlapping update paths")
        let newRoot = root.updating(absolute)
        var op = Operation(engine: self, auth: auth, oldRoot: root, newRoot: newRoot, now: now)
        if absolute.isEmpty { return op.granted(.write, at: path) }
        for (p, _) in absolute where !op.granted(.write, at: p) { return false }
        return op.validates()
    }
}

/// One read or write decision: the inputs and the shared evaluation budget.
private struct Operation {
    let engine: RulesEngine
    let auth: Value
    let oldRoot: Node
    let newRoot: Node?
    let now: Double
    var query: Value = .null
    var budget: StepBudget

    init(engine: RulesEngine, auth: JSON?, oldRoot: Node, newRoot: Node?, now: Int64) {
        self.engine = engine
        self.auth = auth.map(Value.init(json:)) ?? .null
        self.oldRoot = oldRoot
        self.newRoot = newRoot
        self.now = Double(now)
        budget = StepBudget(perExpression: engine.limits.maxEvaluationSteps, remaining: engine.limits.maxOperationSteps)
    }

    mutating func evaluate(_ c: Condition, at path: Path, captures: [String: String]) -> Bool {
        switch c {
        case .constant(let b): return b
        case .expression(let e, _):
            let env = Environment(
                auth: auth, root: Snapshot(tree: oldRoot, path: .root), data: Snapshot(tree: oldRoot, path: path),
                newData: newRoot.map { Snapshot(tree: $0, path: path) }, now: now, query: query, captures: captures)
            return Evaluator.condition(e, env: env, budget: &budget)
        }
    }

    /// `.read`/`.write` cascade: the first true rule from the root down to `path` grants.
    mutating func granted(_ kind: RuleKind, at path: Path) -> Bool {
        var rule = engine.rootRule
        var captures: [String: String] = [:]
        var here = Path.root
        for depth in 0...path.count {
            if let c = kind == .read ? rule.read : rule.write, evaluate(c, at: here, captures: captures) { return true }
            guard depth < path.count else { break }
            let key = path.segments[depth]
            guard let (next, capture) = rule.child(key) else { return false }
            if let (name, value) = capture { captures[name] = value }
            rule = next
            here = here.child(key)
        }
        return false
    }

    /// `.validate` at every location whose data the write creates or changes (and that is not
    /// deleted), ancestors of the write included, since their new data changed too.
    mutating func validates() -> Bool {
        guard let newRoot else { preconditionFailure("validates() is for writes") }
        return validate(engine.rootRule, at: .root, old: oldRoot, new: newRoot, captures: [:])
    }

    private mutating func validate(_ rule: RuleNode, at path: Path, old: Node, new: Node, captures: [String: String]) -> Bool {
        if !rule.containsValidate || new.isEmpty || new.isIdentical(to: old) { return true }
        if let v = rule.validate, !evaluate(v, at: path, captures: captures) { return false }
        for key in new.children.keys.sorted() {
            guard let (next, capture) = rule.child(key) else { continue }
            var inner = captures
            if let (name, value) = capture { inner[name] = value }
            if !validate(next, at: path.child(key), old: old.child(key), new: new.child(key), captures: inner) { return false }
        }
        return true
    }
}
