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
    /// otherwise empty root: [] = none, [root] = the whole tree. Rules that use `root` or
    /// `parent()` need the whole tree; others only the data below the shallowest rule that
    /// looks at `data`.
    public func readDataScope(at path: Path) -> [Path] {
        var scope = DataScope()
        for (depth, rule) in chain(to: path).enumerated() {
            if case .constant(true)? = rule.read { break }  // evaluation stops here
            if case .expression(let e, _)? = rule.read { scope.note(e, at: path, depth: depth) }
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
    public func writeDataScope(at paths: [Path]) -> [Path] {
        var scope = DataScope()
        for path in paths {
            var granted = false
            for (depth, rule) in chain(to: path).enumerated() {
                if case .expression(let e, _)? = rule.validate {
                    scope.note(e, at: path, depth: depth, always: true)
                } else if case .constant? = rule.validate {
                    scope.note(nil, at: path, depth: depth, always: true)
                }
                if granted { continue }
                if case .constant(true)? = rule.write { granted = true; continue }
                if case .expression(let e, _)? = rule.write { scope.note(e, at: path, depth: depth) }
            }
            let below = ruleBelow(path)
            if below.containsValidate {
                if below.validateNeedsWholeTree { scope.whole = true }
                scope.note(nil, at: path, depth: path.count, always: true)
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

/// Collects the subtrees a decision may read: the shallowest data-reading location per target
/// path, or the whole tree.
struct DataScope {
    var whole = false
    var prefixes: [Path] = []

    /// Notes rule `e` at `depth` on the way to `path` (`always`: counts as reading data).
    mutating func note(_ e: Expr?, at path: Path, depth: Int, always: Bool = false) {
        if let e, e.needsWholeTree { whole = true; return }
        guard always || e?.referencesData == true else { return }
        prefixes.append(Path(validated: Array(path.segments.prefix(depth))))
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
    /// Whether a `.validate` here or below uses `root` or `parent()`.
    var validateNeedsWholeTree: Bool {
        if case .expression(let e, _)? = validate, e.needsWholeTree { return true }
        return children.values.contains { $0.validateNeedsWholeTree } || wildcard?.node.validateNeedsWholeTree == true
    }
}

extension Expr {
    /// Whether evaluating this may leave the subtree of the rule's location: `root`, or
    /// `parent()` of a snapshot.
    var needsWholeTree: Bool {
        switch kind {
        case .null, .bool, .number, .string, .regex: return false
        case .variable(let name): return name == "root"
        case .array(let items): return items.contains { $0.needsWholeTree }
        case .member(let e, _), .unary(_, let e): return e.needsWholeTree
        case .index(let a, let b), .binary(_, let a, let b): return a.needsWholeTree || b.needsWholeTree
        case .call(let r, let name, let args): return name == "parent" || r.needsWholeTree || args.contains { $0.needsWholeTree }
        case .ternary(let a, let b, let c): return a.needsWholeTree || b.needsWholeTree || c.needsWholeTree
        }
    }

    /// Whether evaluating this may read the tree (`root`, `data`, `newData`).
    var referencesData: Bool {
        switch kind {
        case .null, .bool, .number, .string, .regex: return false
        case .variable(let name): return name == "root" || name == "data" || name == "newData"
        case .array(let items): return items.contains { $0.referencesData }
        case .member(let e, _), .unary(_, let e): return e.referencesData
        case .index(let a, let b), .binary(_, let a, let b): return a.referencesData || b.referencesData
        case .call(let r, _, let args): return r.referencesData || args.contains { $0.referencesData }
        case .ternary(let a, let b, let c): return a.referencesData || b.referencesData || c.referencesData
        }
    }
}
