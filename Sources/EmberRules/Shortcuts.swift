import EmberCore

/// Verdicts that need no evaluation. Callers check these first: under open rules
/// (`.write: true`) or a constant `.read`, a decision needs neither auth nor data, so it costs
/// a walk down the rule tree. Other decisions evaluate, reading data on demand
/// (`RulesDataSource`).
extension RulesEngine {
    /// The read verdict when it does not depend on the caller or the data: true when a constant
    /// `true` `.read` lies on the way from the root to `path`, false when no `.read` there could
    /// grant. nil: evaluate `canRead`.
    public func readVerdictWithoutEvaluation(at path: Path) -> Bool? {
        // A constant `true` at the root grants every read: no walk (and no chain built) per read.
        if case .constant(true)? = rootRule.read { return true }
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

    /// True when a write at every one of `paths` is granted by a constant `true` `.write` and no
    /// `.validate` applies (none on the way down, none below): the write is allowed as it is.
    public func writeGrantedWithoutEvaluation(at paths: [Path]) -> Bool {
        if grantsEveryWrite { return true }
        return paths.allSatisfy { path in
            var granted = false
            for rule in chain(to: path) {
                if case .constant(true)? = rule.write { granted = true }
                if rule.validate != nil { return false }
            }
            return granted && !ruleBelow(path).containsValidate
        }
    }

    /// Every write is granted as it is: a constant `true` `.write` at the root and no
    /// `.validate` anywhere (open rules, the default). Callers check it before they build the
    /// paths `writeGrantedWithoutEvaluation` takes; it answers in O(1) for every write.
    public var grantsEveryWrite: Bool {
        guard case .constant(true)? = rootRule.write else { return false }
        return !rootRule.containsValidate
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
