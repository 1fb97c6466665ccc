import EmberCore

/// Why an evaluation stopped. Any of these makes the condition false (Firebase: errors deny).
struct EvalError: Error {
    let message: String
}

/// What the variables of one rule evaluation are bound to.
struct Environment {
    var auth: Value
    var root: Snapshot
    var data: Snapshot
    var newData: Snapshot?
    var now: Double
    /// `query` of a `.read` (see `RulesEngine.queryValue`).
    var query: Value
    var captures: [String: String]
}

/// Counts evaluation steps for one operation, shared by all its rule evaluations.
struct StepBudget {
    let perExpression: Int
    var remaining: Int
}

/// Tree-walking evaluator. Types were checked at load, but `any` values are checked here, and
/// every failure (null receiver, missing member, wrong run-time type) is an `EvalError`.
struct Evaluator {
    let env: Environment
    private var steps = 0
    private var budget: StepBudget

    /// Evaluates a condition; true only for the boolean `true`.
    static func condition(_ e: Expr, env: Environment, budget: inout StepBudget) -> Bool {
        var ev = Evaluator(env: env, budget: budget)
        defer { budget = ev.budget }
        guard case .bool(true)? = try? ev.eval(e) else { return false }
        return true
    }

    /// The value of `e`, nil when its evaluation fails.
    static func value(_ e: Expr, env: Environment, budget: inout StepBudget) -> Value? {
        var ev = Evaluator(env: env, budget: budget)
        defer { budget = ev.budget }
        return try? ev.eval(e)
    }

    private init(env: Environment, budget: StepBudget) {
        self.env = env
        self.budget = budget
    }

    /// Charges `cost` steps (1 per AST node; string work also per KiB, so large data counts).
    private mutating func step(_ cost: Int = 1) throws(EvalError) {
        steps += cost
        budget.remaining -= cost
        guard steps <= budget.perExpression else { throw EvalError(message: "evaluation step limit exceeded") }
        guard budget.remaining >= 0 else { throw EvalError(message: "operation step limit exceeded") }
    }

    mutating func eval(_ e: Expr) throws(EvalError) -> Value {
        try step()
        switch e.kind {
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .number(let d): return .number(d)
        case .string(let s): return .string(s)
        case .regex, .array: throw EvalError(message: "misplaced literal")
        case .variable(let name):
            switch name {
            case "auth": return env.auth
            case "root": return .snapshot(env.root)
            case "data": return .snapshot(env.data)
            case "now": return .number(env.now)
            case "query": return env.query
            case "newData":
                guard let n = env.newData else { throw EvalError(message: "newData in .read") }
                return .snapshot(n)
            default:
                guard let c = env.captures[name] else { throw EvalError(message: "unbound \(name)") }
                return .string(c)
            }
        case .member(let obj, let name):
            return try member(try eval(obj), name)
        case .index(let obj, let keyExpr):
            let o = try eval(obj)
            switch try eval(keyExpr) {
            case .string(let k): return try member(o, k)
            case .number(let d) where d >= 0 && d == d.rounded() && d < 1e9:
                return try member(o, String(Int(d)))
            default: throw EvalError(message: "bad index")
            }
        case .call(let recvExpr, let name, let args):
            return try call(try eval(recvExpr), name, args)
        case .unary(.not, let x):
            guard case .bool(let b) = try eval(x) else { throw EvalError(message: "! needs a boolean") }
            return .bool(!b)
        case .unary(.negate, let x):
            guard case .number(let d) = try eval(x) else { throw EvalError(message: "- needs a number") }
            return .number(-d)
        case .binary(let op, let l, let r):
            return try binary(op, l, r)
        case .ternary(let c, let a, let b):
            guard case .bool(let cond) = try eval(c) else { throw EvalError(message: "?: needs a boolean") }
            return try eval(cond ? a : b)
        }
    }

    private func member(_ v: Value, _ name: String) throws(EvalError) -> Value {
        switch v {
        case .string(let s) where name == "length": return .number(Double(s.utf16.count))
        case .compound(.object(let o)):
            guard let m = o[name] else { throw EvalError(message: "no member \(name)") }
            return Value(json: m)
        case .tree(let node):
            let child = node.child(name)
            guard !child.isEmpty else { throw EvalError(message: "no member \(name)") }
            return Value(node: child)
        case .compound(.array(let a)):
            if name == "length" { return .number(Double(a.count)) }
            guard let i = Int(name), i >= 0, i < a.count else { throw EvalError(message: "no element \(name)") }
            return Value(json: a[i])
        default:
            throw EvalError(message: "no member \(name)")
        }
    }

    private mutating func call(_ recv: Value, _ name: String, _ args: [Expr]) throws(EvalError) -> Value {
        switch recv {
        case .snapshot(let snap): return try snapshotCall(snap, name, args)
        case .string(let s): return try stringCall(s, name, args)
        default: throw EvalError(message: "\(name)() on a non-snapshot, non-string value")
        }
    }

    private mutating func stringArg(_ e: Expr) throws(EvalError) -> String {
        guard case .string(let s) = try eval(e) else { throw EvalError(message: "argument must be a string") }
        return s
    }

    /// A relative path argument of child()/hasChild(); invalid keys and empty paths are errors.
    private mutating func pathArg(_ e: Expr) throws(EvalError) -> Path {
        let s = try stringArg(e)
        guard let p = try? Path(s), !p.isRoot else { throw EvalError(message: "invalid path") }
        return p
    }

    private mutating func snapshotCall(_ snap: Snapshot, _ name: String, _ args: [Expr]) throws(EvalError) -> Value {
        switch name {
        case "val": return Value(node: snap.node)
        case "exists": return .bool(snap.source.exists(at: snap.path))
        case "child":
            let p = try pathArg(args[0])
            let full = snap.path.appending(p)
            guard full.count <= Limits.maxPathDepth else { throw EvalError(message: "path too deep") }
            return .snapshot(Snapshot(source: snap.source, path: full))
        case "parent":
            guard let parent = snap.path.parent else { throw EvalError(message: "root has no parent") }
            return .snapshot(Snapshot(source: snap.source, path: parent))
        case "hasChild":
            let p = try pathArg(args[0])
            let full = snap.path.appending(p)
            guard full.count <= Limits.maxPathDepth else { return .bool(false) }
            return .bool(snap.source.exists(at: full))
        case "hasChildren":
            guard let arg = args.first else { return .bool(snap.source.hasChildren(at: snap.path)) }
            guard case .array(let items) = arg.kind else { throw EvalError(message: "hasChildren needs an array") }
            for item in items {
                let k = try stringArg(item)
                // A key with '/' or bad characters names no child (as a lookup in the node).
                guard Key.isValid(k), snap.path.count < Limits.maxPathDepth else { return .bool(false) }
                if !snap.source.exists(at: snap.path.child(k)) { return .bool(false) }
            }
            return .bool(items.isEmpty ? snap.source.hasChildren(at: snap.path) : true)
        case "getPriority":
            switch snap.source.shallow(at: snap.path).priority {
            case .number(let d)?: return .number(d)
            case .string(let s)?: return .string(s)
            case nil: return .null
            }
        case "isNumber":
            switch snap.source.shallow(at: snap.path).leaf { case .int?, .double?: return .bool(true); default: return .bool(false) }
        case "isString":
            if case .string? = snap.source.shallow(at: snap.path).leaf { return .bool(true) }
            return .bool(false)
        case "isBoolean":
            if case .bool? = snap.source.shallow(at: snap.path).leaf { return .bool(true) }
            return .bool(false)
        default: throw EvalError(message: "no snapshot method \(name)")
        }
    }

    private mutating func stringCall(_ s: String, _ name: String, _ args: [Expr]) throws(EvalError) -> Value {
        try step(s.utf8.count / 1024)
        switch name {
        case "contains":
            let t = try stringArg(args[0])
            return .bool(t.isEmpty || !Evaluator.ranges(of: Array(t.utf8), in: Array(s.utf8)).isEmpty)
        case "beginsWith": return .bool(s.utf8.starts(with: try stringArg(args[0]).utf8))
        case "endsWith": return .bool(s.utf8.reversed().starts(with: try stringArg(args[0]).utf8.reversed()))
        case "toLowerCase": return .string(s.lowercased())
        case "toUpperCase": return .string(s.uppercased())
        case "replace":
            let a = try stringArg(args[0]), b = try stringArg(args[1])
            // Firebase replaces every occurrence (unlike JavaScript's first-only replace).
            guard !a.isEmpty else { return .string(s) }
            let bytes = Array(s.utf8)
            var out: [UInt8] = []
            var last = 0
            for r in Evaluator.ranges(of: Array(a.utf8), in: bytes) {
                out += bytes[last..<r.lowerBound]
                out += b.utf8
                last = r.upperBound
            }
            out += bytes[last...]
            return .string(String(decoding: out, as: UTF8.self))
        case "matches":
            guard case .regex(let r) = args[0].kind else { throw EvalError(message: "matches needs a regex") }
            return .bool(r.matches(s))
        default: throw EvalError(message: "no string method \(name)")
        }
    }

    /// Non-overlapping occurrences of `needle`, left to right. Matching whole UTF-8 sequences of
    /// valid strings always lands on scalar boundaries, and compares code points exactly (as
    /// JavaScript does), not Swift's canonically-equivalent characters.
    static func ranges(of needle: [UInt8], in hay: [UInt8]) -> [Range<Int>] {
        guard !needle.isEmpty, needle.count <= hay.count else { return [] }
        var out: [Range<Int>] = []
        var i = 0
        while i + needle.count <= hay.count {
            if hay[i] == needle[0], hay[i..<i + needle.count].elementsEqual(needle) {
                out.append(i..<i + needle.count)
                i += needle.count
            } else {
                i += 1
            }
        }
        return out
    }

    private mutating func binary(_ op: BinaryOp, _ l: Expr, _ r: Expr) throws(EvalError) -> Value {
        // Short-circuit: the right side of && / || is not evaluated (so it cannot fail) when decided.
        if op == .and || op == .or {
            guard case .bool(let a) = try eval(l) else { throw EvalError(message: "\(op.rawValue) needs booleans") }
            if op == .and && !a { return .bool(false) }
            if op == .or && a { return .bool(true) }
            guard case .bool(let b) = try eval(r) else { throw EvalError(message: "\(op.rawValue) needs booleans") }
            return .bool(b)
        }
        let a = try eval(l), b = try eval(r)
        switch op {
        case .eq, .seq: return .bool(a.strictlyEquals(b))
        case .ne, .sne: return .bool(!a.strictlyEquals(b))
        case .add:
            if case .number(let x) = a, case .number(let y) = b { return .number(x + y) }
            if case .string(let x) = a, let y = b.concatenationText {
                try step((x.utf8.count + y.utf8.count) / 1024)
                return .string(x + y)
            }
            if case .string(let y) = b, let x = a.concatenationText {
                try step((x.utf8.count + y.utf8.count) / 1024)
                return .string(x + y)
            }
            throw EvalError(message: "+ needs numbers or strings")
        case .sub, .mul, .div, .mod:
            guard case .number(let x) = a, case .number(let y) = b else { throw EvalError(message: "arithmetic needs numbers") }
            switch op {
            case .sub: return .number(x - y)
            case .mul: return .number(x * y)
            case .div: return .number(x / y)
            default: return .number(x.truncatingRemainder(dividingBy: y))
            }
        case .lt, .le, .gt, .ge:
            let c: Int
            switch (a, b) {
            case let (.number(x), .number(y)):
                guard !x.isNaN, !y.isNaN else { return .bool(false) }
                c = x < y ? -1 : (x > y ? 1 : 0)
            case let (.string(x), .string(y)):
                // UTF-16 code unit order, as JavaScript and Firebase's server compare strings.
                c = x.utf16.lexicographicallyPrecedes(y.utf16) ? -1 : (x.utf16.elementsEqual(y.utf16) ? 0 : 1)
            default: throw EvalError(message: "comparison needs two numbers or two strings")
            }
            switch op {
            case .lt: return .bool(c < 0)
            case .le: return .bool(c <= 0)
            case .gt: return .bool(c > 0)
            default: return .bool(c >= 0)
            }
        case .and, .or: preconditionFailure("handled above")
        }
    }
}
