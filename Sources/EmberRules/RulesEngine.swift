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
                && zip(def.pattern, path.segments).allSatisfy { $0.hasPrefix("$") || $0.isExactly($1) }
                && def.indexes.contains(index)
        }
    }

    /// Read of `path`: granted by a true `.read` at the path or any ancestor. `query` is the
    /// client's query, if any, for rules that bound queries (`query.limitToFirst <= 100`).
    public func canRead(path: Path, auth: JSON?, root: Node, now: Int64, query: QuerySpec? = nil) -> Bool {
        canRead(path: path, auth: auth, data: NodeDataSource(root), now: now, query: query)
    }

    /// Set of `newValue` at `path` (a delete when empty): `.write` grant, then `.validate`.
    public func canWrite(path: Path, newValue: Node, auth: JSON?, root: Node, now: Int64) -> Bool {
        canWrite(path: path, newValue: newValue, auth: auth, data: NodeDataSource(root), now: now)
    }

    /// Multi-path update at `path` (`parts` relative to it), all or nothing: every part needs a
    /// `.write` grant (with `newData` from the combined result), and the result must validate.
    public func canUpdate(path: Path, parts: [(Path, Node)], auth: JSON?, root: Node, now: Int64) -> Bool {
        canUpdate(path: path, parts: parts, auth: auth, data: NodeDataSource(root), now: now)
    }

    /// `canRead` over data read on demand (see `RulesDataSource`).
    public func canRead(path: Path, auth: JSON?, data: any RulesDataSource, now: Int64, query: QuerySpec? = nil) -> Bool {
        var op = Operation(engine: self, auth: auth, old: data, writes: nil, now: now)
        op.query = RulesEngine.queryValue(query)
        return op.granted(.read, at: path)
    }

    /// `canWrite` over data read on demand; `newData` is `data` with the write laid over it.
    public func canWrite(path: Path, newValue: Node, auth: JSON?, data: any RulesDataSource, now: Int64) -> Bool {
        var op = Operation(engine: self, auth: auth, old: data, writes: [(path, newValue)], now: now)
        return op.granted(.write, at: path) && op.validates()
    }

    /// `canUpdate` over data read on demand.
    public func canUpdate(path: Path, parts: [(Path, Node)], auth: JSON?, data: any RulesDataSource, now: Int64) -> Bool {
        let absolute = parts.map { (path.appending($0.0), $0.1) }
        // Overlapping parts make the result order-dependent; the write validation refuses them.
        let sorted = absolute.map(\.0).sorted()
        precondition(zip(sorted, sorted.dropFirst()).allSatisfy { !$0.contains($1) }, "overlapping update paths")
        var op = Operation(engine: self, auth: auth, old: data, writes: absolute, now: now)
        if absolute.isEmpty { return op.granted(.write, at: path) }
        for (p, _) in absolute where !op.granted(.write, at: p) { return false }
        return op.validates()
    }
}

/// One read or write decision: the inputs and the shared evaluation budget.
struct Operation {
    let engine: RulesEngine
    let auth: Value
    let old: any RulesDataSource
    /// The write's parts (absolute, non-overlapping); nil for a read.
    let writes: [(Path, Node)]?
    let new: (any RulesDataSource)?
    let now: Double
    var query: Value = .null
    var budget: StepBudget
    /// Set by the `explain` calls (the Rules Playground): every evaluated rule, in order.
    var trace: [RulesTraceStep]?
    /// Per part: whether it changes the stored data (computed when a `.validate` above asks).
    private var changedCache: [Path: Bool] = [:]

    init(engine: RulesEngine, auth: JSON?, old: any RulesDataSource, writes: [(Path, Node)]?, now: Int64) {
        self.engine = engine
        self.auth = auth.map(Value.init(json:)) ?? .null
        self.old = old
        self.writes = writes
        self.new = writes.map { OverlayDataSource(base: old, writes: $0) }
        self.now = Double(now)
        budget = StepBudget(perExpression: engine.limits.maxEvaluationSteps, remaining: engine.limits.maxOperationSteps)
    }

    mutating func evaluate(_ c: Condition, _ kind: RuleKind, at path: Path, captures: [String: String]) -> Bool {
        let result: Bool
        switch c {
        case .constant(let b): result = b
        case .expression(let e, _):
            let env = Environment(
                auth: auth, root: Snapshot(source: old, path: .root), data: Snapshot(source: old, path: path),
                newData: new.map { Snapshot(source: $0, path: path) }, now: now, query: query, captures: captures)
            result = Evaluator.condition(e, env: env, budget: &budget)
        }
        if trace != nil {
            trace!.append(RulesTraceStep(kind: kind, path: path, location: engine.location(of: path), rule: c.source, result: result))
        }
        return result
    }

    /// `.read`/`.write` cascade: the first true rule from the root down to `path` grants.
    mutating func granted(_ kind: RuleKind, at path: Path) -> Bool {
        var rule = engine.rootRule
        var captures: [String: String] = [:]
        var here = Path.root
        for depth in 0...path.count {
            if let c = kind == .read ? rule.read : rule.write, evaluate(c, kind, at: here, captures: captures) { return true }
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
    /// deleted), ancestors of the write included, since their new data changed too. Above the
    /// parts only the way down to them is walked; below a part, its new node against the old.
    mutating func validates() -> Bool {
        guard writes != nil else { preconditionFailure("validates() is for writes") }
        return validateAbove(engine.rootRule, at: .root, captures: [:])
    }

    /// `path` is a part or an ancestor of one.
    private mutating func validateAbove(_ rule: RuleNode, at path: Path, captures: [String: String]) -> Bool {
        guard rule.containsValidate, let writes, let new else { return true }
        if let part = writes.first(where: { $0.0 == path }) {
            return validate(rule, at: path, old: old.node(at: path), new: part.1, captures: captures)
        }
        let parts = writes.filter { path.contains($0.0) }
        if !new.exists(at: path) { return true }
        if !parts.contains(where: { changes($0) }) { return true }  // new data identical to old
        if let v = rule.validate, !evaluate(v, .validate, at: path, captures: captures) { return false }
        let keys = Set(parts.map { $0.0.segments[path.count] })
        for key in keys.sorted() {
            guard let (next, capture) = rule.child(key) else { continue }
            var inner = captures
            if let (name, value) = capture { inner[name] = value }
            if !validateAbove(next, at: path.child(key), captures: inner) { return false }
        }
        return true
    }

    /// Whether writing `part` changes the stored data (a deletion of nothing, or the same value, does not).
    private mutating func changes(_ part: (Path, Node)) -> Bool {
        if let c = changedCache[part.0] { return c }
        let c = part.1.isEmpty ? old.exists(at: part.0) : !old.node(at: part.0).isIdentical(to: part.1)
        changedCache[part.0] = c
        return c
    }

    private mutating func validate(_ rule: RuleNode, at path: Path, old: Node, new: Node, captures: [String: String]) -> Bool {
        if !rule.containsValidate || new.isEmpty || new.isIdentical(to: old) { return true }
        if let v = rule.validate, !evaluate(v, .validate, at: path, captures: captures) { return false }
        for key in new.children.keys.sorted(by: KeyOrder.less) {
            guard let (next, capture) = rule.child(key) else { continue }
            var inner = captures
            if let (name, value) = capture { inner[name] = value }
            if !validate(next, at: path.child(key), old: old.child(key), new: new.child(key), captures: inner) { return false }
        }
        return true
    }
}
