import EmberCore

/// One evaluated rule in an explained decision (the console's Rules Playground shows these).
public struct RulesTraceStep: Sendable, Equatable {
    /// `.read`, `.write` or `.validate`.
    public let kind: String
    /// The data location the rule was evaluated at.
    public let path: Path
    /// The rules location that matched it, wildcards as their `$name` (`/users/$uid`).
    public let location: String
    /// The rule as written (`true`, `auth.uid === $uid`).
    public let rule: String
    public let result: Bool

    init(kind: RuleKind, path: Path, location: String, rule: String, result: Bool) {
        self.kind = kind.rawValue
        self.path = path
        self.location = location
        self.rule = rule
        self.result = result
    }
}

/// A read or write decision with its reasons: the same verdict as `canRead`/`canWrite`/`canUpdate`
/// (the same evaluation, recorded), the rule that decided it and every rule evaluated on the way.
public struct RulesDecision: Sendable {
    public let allowed: Bool
    /// The `.read`/`.write` rule that granted access, or the `.validate` rule that failed; nil
    /// when no rule granted access (every `.read`/`.write` on the way was false or absent).
    public let decidedBy: RulesTraceStep?
    public let steps: [RulesTraceStep]

    /// One line for people: why the verdict is what it is.
    public var reason: String {
        guard let d = decidedBy else {
            return "Denied: no \(steps.first?.kind ?? "matching") rule on the way to this location granted access"
        }
        if allowed { return "Allowed by \(d.kind) at \(d.location): \(d.rule)" }
        return "Denied by \(d.kind) at \(d.location): \(d.rule) is false"
    }
}

extension Condition {
    var source: String {
        switch self {
        case .constant(let b): return b ? "true" : "false"
        case .expression(_, let source): return source
        }
    }
}

extension RulesEngine {
    /// The rules location matching `path`: literal keys as themselves, others as the wildcard's name.
    func location(of path: Path) -> String {
        var rule = rootRule
        var parts: [String] = []
        for key in path.segments {
            guard let (next, capture) = rule.child(key) else {
                parts.append(key)
                rule = .empty
                continue
            }
            parts.append(capture?.0 ?? key)
            rule = next
        }
        return "/" + parts.joined(separator: "/")
    }

    /// `canRead`, explained.
    public func explainRead(path: Path, auth: JSON?, data: any RulesDataSource, now: Int64, query: QuerySpec? = nil) -> RulesDecision {
        var op = Operation(engine: self, auth: auth, old: data, writes: nil, now: now)
        op.query = RulesEngine.queryValue(query)
        op.trace = []
        let granted = op.granted(.read, at: path)
        return RulesDecision(allowed: granted, decidedBy: granted ? op.trace!.last : nil, steps: op.trace!)
    }

    /// `canWrite` (a set; a delete when `newValue` is empty), explained.
    public func explainWrite(path: Path, newValue: Node, auth: JSON?, data: any RulesDataSource, now: Int64) -> RulesDecision {
        explainWrite(path: path, writes: [(path, newValue)], grantPaths: [path], auth: auth, data: data, now: now)
    }

    /// `canUpdate` (`parts` relative to `path`), explained.
    public func explainUpdate(path: Path, parts: [(Path, Node)], auth: JSON?, data: any RulesDataSource, now: Int64) -> RulesDecision {
        let absolute = parts.map { (path.appending($0.0), $0.1) }
        let sorted = absolute.map(\.0).sorted()
        precondition(zip(sorted, sorted.dropFirst()).allSatisfy { !$0.contains($1) }, "overlapping update paths")
        return explainWrite(path: path, writes: absolute, grantPaths: absolute.isEmpty ? [path] : absolute.map(\.0),
                            auth: auth, data: data, now: now)
    }

    /// Every grant path needs a true `.write`; then the result must validate. The deciding rule
    /// is the first failing grant search (none) or validate, else the last grant.
    private func explainWrite(path: Path, writes: [(Path, Node)], grantPaths: [Path], auth: JSON?,
                              data: any RulesDataSource, now: Int64) -> RulesDecision {
        var op = Operation(engine: self, auth: auth, old: data, writes: writes, now: now)
        op.trace = []
        var grant: RulesTraceStep?
        for p in grantPaths {
            guard op.granted(.write, at: p) else { return RulesDecision(allowed: false, decidedBy: nil, steps: op.trace!) }
            grant = op.trace!.last
        }
        if writes.isEmpty { return RulesDecision(allowed: true, decidedBy: grant, steps: op.trace!) }
        let valid = op.validates()
        return RulesDecision(allowed: valid, decidedBy: valid ? grant : op.trace!.last, steps: op.trace!)
    }
}
