import EmberCore

/// What a decision needs before it can be evaluated. Callers that keep data on disk use this to
/// skip reading the tree: open rules (`.write: true`) and auth-only rules (`auth.uid == $uid`)
/// decide without it, so writes under them never pay for a root snapshot.
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

    /// Whether `canRead` at `path` may look at `root` or `data` (otherwise pass an empty root).
    public func readNeedsData(at path: Path) -> Bool {
        for rule in chain(to: path) {
            switch rule.read {
            case .constant(true)?: return false  // evaluation stops here
            case .expression(let e, _)? where e.referencesData: return true
            default: break
            }
        }
        return false
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

    /// Whether `canWrite`/`canUpdate` at `paths` may look at the stored data (`root`, `data`,
    /// `newData`, or any `.validate`, whose walk compares new data with old). If not, an empty
    /// root gives the same verdict.
    public func writeNeedsData(at paths: [Path]) -> Bool {
        for path in paths {
            for rule in chain(to: path) {
                if rule.validate != nil { return true }
                if case .constant(true)? = rule.write { break }
                if case .expression(let e, _)? = rule.write, e.referencesData { return true }
            }
            if ruleBelow(path).containsValidate { return true }
        }
        return false
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

extension Expr {
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
