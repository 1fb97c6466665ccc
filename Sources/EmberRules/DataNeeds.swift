import EmberCore

/// What a decision needs before it can be evaluated. Callers that keep data on disk use this to
/// skip reading the tree: open rules (`.write: true`) and auth-only rules (`auth.uid == $uid`)
/// decide without it, so writes under them never pay for a root snapshot; rules that look at
/// `data`/`newData` only need the subtree of the rule that looks.
extension RulesEngine {
    /// The read verdict when it does not depend on the caller or the data: true when a constant
    /// `true` `.read` lies on the way from the root to `path`, false when no `.read` there could
    /// grant. nil: evaluate `canRead`.
    public func readVerdictWithoutEvaluation(at path: Path) -> Bool? {
        var couldGrant = false
        for rule in chain(to: path) {
            switch rule.read {
            case .constant(true)?: return true
            case .expression?: couldGrant = true
            case .constant(false)?, nil: break
            }
        }
        return couldGrant ? nil : false
    }

    /// The data `canRead` at `path` may look at, as subtrees (absolute paths) to load into an
    /// otherwise empty root: [] = none, [root] = the whole tree (a `root.child(...)` whose path
    /// starts with no literal). `root.child('admins')` needs /admins; `data` the rule's location.
    public func readDataScope(at path: Path, auth: JSON?, now: Int64) -> [Path] {
        var scope = DataScope(engine: self, auth: auth, now: now)
        for (depth, (rule, captures)) in chainWithCaptures(to: path).enumerated() {
            if case .constant(true)? = rule.read { break }  // evaluation stops here
            if case .expression(let e, _)? = rule.read { scope.note(e, at: path, depth: depth, captures: captures) }
        }
        return scope.paths
    }

    /// True when a write at every one of `paths` is granted by a constant `true` `.write` and no
    /// `.validate` applies (none on the way down, none below): the write is allowed as it is.
    public func writeGrantedWithoutEvaluation(at paths: [Path]) -> Bool {
        paths.allSatisfy { path in
            var granted = false
            for rule in chain(to: path) {
                if case .constant(true)? = rule.write { granted = true }
                if rule.validate != nil { return false }
            }
            return granted && !ruleBelow(path).containsValidate
        }
    }

    /// The stored data `canWrite`/`canUpdate` at `paths` may look at (see `readDataScope`):
    /// `.write` expressions up to a constant grant, every `.validate` on the way down, and the
    /// `.validate`s below each path (their walk compares new data with old).
    public func writeDataScope(at paths: [Path], auth: JSON?, now: Int64) -> [Path] {
        var scope = DataScope(engine: self, auth: auth, now: now)
        for path in paths {
            var granted = false
            var last: [String: String] = [:]
            for (depth, (rule, captures)) in chainWithCaptures(to: path).enumerated() {
                last = captures
                if case .expression(let e, _)? = rule.validate {
                    scope.note(e, at: path, depth: depth, captures: captures, always: true)
                } else if case .constant? = rule.validate {
                    scope.note(nil, at: path, depth: depth, captures: captures, always: true)
                }
                if granted { continue }
                if case .constant(true)? = rule.write { granted = true; continue }
                if case .expression(let e, _)? = rule.write { scope.note(e, at: path, depth: depth, captures: captures) }
            }
            let below = ruleBelow(path)
            if below.containsValidate {
                below.collectValidateNeedsBelow(into: &scope, captures: last)
                scope.note(nil, at: path, depth: path.count, captures: last, always: true)
            }
        }
        return scope.paths
    }

    /// A root holding only `scope`'s subtrees, read by `load` (the whole tree for [root]).
    public static func partialRoot(_ scope: [Path], load: (Path) throws -> Node) rethrows -> Node {
        var root = Node.empty
        for p in scope {
            if p.isRoot { return try load(.root) }
            root.set(try load(p), at: p)
        }
        return root
    }

    /// Rule nodes from the root down to `path` with the wildcard captures bound there.
    func chainWithCaptures(to path: Path) -> [(RuleNode, [String: String])] {
        var captures: [String: String] = [:]
        var out = [(rootRule, captures)]
        var rule = rootRule
        for key in path.segments {
            guard let (next, capture) = rule.child(key) else { break }
            if let (name, value) = capture { captures[name] = value }
            out.append((next, captures))
            rule = next
        }
        return out
    }

    /// Rule nodes from the root down to `path`, as far as rules exist.
    func chain(to path: Path) -> [RuleNode] {
        var out = [rootRule]
        var rule = rootRule
        for key in path.segments {
            guard let (next, _) = rule.child(key) else { break }
            out.append(next)
            rule = next
        }
        return out
    }

    /// The rule node at `path`, or an empty one when rules stop above it.
    func ruleBelow(_ path: Path) -> RuleNode {
        var rule = rootRule
        for key in path.segments {
            guard let (next, _) = rule.child(key) else { return .empty }
            rule = next
        }
        return rule
    }
}

/// Collects the subtrees a decision may read: per rule that looks at data, the subtree of its
/// location (raised by its `parent()` calls), and for each `root.child(...)` lookup the path it
/// names, its arguments evaluated when they depend only on `auth`, `now`, captures and literals
/// (`root.child('admins').child(auth.uid)` → /admins/<uid>); the whole tree when unknown.
struct DataScope {
    let engine: RulesEngine
    let auth: Value
    let now: Double
    var whole = false
    var prefixes: [Path] = []

    init(engine: RulesEngine, auth: JSON?, now: Int64) {
        self.engine = engine
        self.auth = auth.map(Value.init(json:)) ?? .null
        self.now = Double(now)
    }

    /// Notes rule `e` at `depth` on the way to `path` (`always`: its location's data counts as
    /// read, as for `.validate`, whose walk compares new data with old there).
    mutating func note(_ e: Expr?, at path: Path, depth: Int, captures: [String: String], always: Bool = false) {
        var up: Int? = always ? 0 : nil
        if let e {
            let n = e.dataNeeds()
            if n.whole { whole = true; return }
            for chain in n.rootChains { addLookup(chain, captures: captures) }
            if let u = n.dataUp { up = max(up ?? 0, u) }
        }
        if let up { prefixes.append(Path(validated: Array(path.segments.prefix(max(0, depth - up))))) }
    }

    /// The path of `root.child(a1).child(a2)...`: arguments that need no data are evaluated; the
    /// first that cannot be contributes its literal start, and the path ends there.
    mutating func addLookup(_ args: [Expr], captures: [String: String]) {
        let empty = Snapshot(source: NodeDataSource(.empty), path: .root)
        let env = Environment(auth: auth, root: empty, data: empty, newData: nil, now: now, query: .null, captures: captures)
        var budget = StepBudget(perExpression: engine.limits.maxEvaluationSteps, remaining: engine.limits.maxEvaluationSteps)
        var path = Path.root
        for arg in args {
            if arg.dataNeeds().isEmpty, case .string(let s)? = Evaluator.value(arg, env: env, budget: &budget),
               let rel = try? Path(s), !rel.isRoot, path.count + rel.count <= Limits.maxPathDepth {
                path = path.appending(rel)
                continue
            }
            path = path.appending(Expr.literalPrefix(arg))
            break
        }
        if path.isRoot { whole = true } else { prefixes.append(path) }
    }

    /// Disjoint subtrees (an ancestor absorbs its descendants).
    var paths: [Path] {
        if whole { return [.root] }
        var out: [Path] = []
        for p in prefixes.sorted(by: { $0.count < $1.count }) where !out.contains(where: { $0.contains(p) }) {
            out.append(p)
        }
        return out
    }
}

extension RuleNode {
    /// Adds what the `.validate`s below this node read besides their own location: `root`
    /// lookups; `parent()` (whose target depends on how deep) takes the whole tree.
    func collectValidateNeedsBelow(into scope: inout DataScope, captures: [String: String]) {
        for c in Array(children.values) + (wildcard.map { [$0.node] } ?? []) {
            if case .expression(let e, _)? = c.validate {
                let n = e.dataNeeds()
                if n.whole || (n.dataUp ?? 0) > 0 { scope.whole = true }
                // Captures of wildcards below are unknown here: such arguments stay literal.
                for chain in n.rootChains { scope.addLookup(chain, captures: captures) }
            }
            c.collectValidateNeedsBelow(into: &scope, captures: captures)
        }
    }
}

/// What one expression reads: the whole tree, subtrees by absolute path (`root.child('a')`),
/// and its own location's data raised by `dataUp` parents (nil: it does not read `data`).
struct ExprNeeds {
    var whole = false
    /// `child()` arguments of each `root` lookup, in order.
    var rootChains: [[Expr]] = []
    var dataUp: Int?

    var isEmpty: Bool { !whole && rootChains.isEmpty && dataUp == nil }
}

extension Expr {
    func dataNeeds() -> ExprNeeds {
        var n = ExprNeeds()
        collectNeeds(into: &n)
        return n
    }

    private func collectNeeds(into n: inout ExprNeeds) {
        if let (base, args) = snapshotChain() {
            switch base {
            case .root(let chain): if chain.isEmpty { n.whole = true } else { n.rootChains.append(chain) }
            case .data(let up): n.dataUp = max(n.dataUp ?? 0, up)
            }
            for a in args { a.collectNeeds(into: &n) }
            return
        }
        switch kind {
        case .null, .bool, .number, .string, .regex, .variable: break
        case .array(let items): for i in items { i.collectNeeds(into: &n) }
        case .member(let e, _), .unary(_, let e): e.collectNeeds(into: &n)
        case .index(let a, let b), .binary(_, let a, let b): a.collectNeeds(into: &n); b.collectNeeds(into: &n)
        case .call(let r, _, let args): r.collectNeeds(into: &n); for a in args { a.collectNeeds(into: &n) }
        case .ternary(let a, let b, let c): a.collectNeeds(into: &n); b.collectNeeds(into: &n); c.collectNeeds(into: &n)
        }
    }

    enum ChainBase { case root([Expr]), data(up: Int) }

    /// A `child()`/`parent()` chain on `root`, `data` or `newData`: where it can lead, and the
    /// `child()` argument expressions (which may read data themselves).
    func snapshotChain() -> (ChainBase, [Expr])? {
        switch kind {
        case .variable("root"): return (.root([]), [])
        case .variable("data"), .variable("newData"): return (.data(up: 0), [])
        case .call(let r, "child", let args) where args.count == 1:
            guard let (base, inner) = r.snapshotChain() else { return nil }
            if case .root(let chain) = base { return (.root(chain + args), inner + args) }
            return (base, inner + args)
        case .call(let r, "parent", let args) where args.isEmpty:
            guard let (base, inner) = r.snapshotChain() else { return nil }
            switch base {
            // One argument may be several segments ('a/b'): a parent of it is not known here.
            case .root: return (.root([]), inner)
            case .data(let up): return (.data(up: up + 1), inner)
            }
        default: return nil
        }
    }

    /// The path a `child()` argument surely starts with: its literal text up to the first
    /// dynamic part (`'users/' + auth.uid` → users); root when nothing is known.
    static func literalPrefix(_ e: Expr) -> Path {
        let (text, complete) = e.knownText()
        var segments = text.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        if !complete && !text.hasSuffix("/") && !segments.isEmpty { segments.removeLast() }
        return (try? Path(segments.joined(separator: "/"))) ?? .root
    }

    /// The literal start of a string expression, and whether that is all of it. Only a chain
    /// of `+` that starts with a string literal concatenates (numbers on the left add).
    private func knownText() -> (String, complete: Bool) {
        switch kind {
        case .string(let s): return (s, true)
        case .binary(.add, let l, let r):
            // A complete left side is made of string literals only, so this `+` concatenates.
            let (a, full) = l.knownText()
            guard full else { return (a, false) }
            let (b, bf) = r.knownText()
            return (a + b, bf)
        default: return ("", false)
        }
    }
}
