/// Static types of rule expressions. Strict where Firebase is strict (snapshots, known methods,
/// arity, `newData` in `.read`); lenient (`any`) for `auth.*` members and `val()` results, whose
/// shape is only known at run time.
enum RuleType: String, Sendable {
    case boolean, number, string, snapshot, auth, query, any, null, regex, array

    var name: String {
        switch self {
        case .snapshot: return "a snapshot"
        case .auth: return "the auth object"
        case .query: return "the query object"
        case .any: return "a value"
        case .regex: return "a regular expression"
        case .array: return "an array"
        case .null: return "null"
        default: return "a \(rawValue)"
        }
    }
}

struct TypeError: Error {
    let offset: Int
    let message: String
}

/// The kind of rule an expression belongs to: decides whether `newData` exists.
enum RuleKind: String, Sendable {
    case read = ".read", write = ".write", validate = ".validate"
}

struct TypeChecker {
    let kind: RuleKind
    /// `$name` captures of the enclosing wildcards.
    let captures: Set<String>

    /// Checks a whole condition: it must be boolean (or `any`, decided at run time).
    func checkCondition(_ e: Expr) throws(TypeError) {
        let t = try type(of: e)
        guard t == .boolean || t == .any else {
            throw TypeError(offset: e.offset, message: "\(kind.rawValue) must be a boolean expression, but this is \(t.name)")
        }
    }

    static let snapshotMethods: [String: (args: [RuleType], result: RuleType)] = [
        "val": ([], .any), "child": ([.string], .snapshot), "parent": ([], .snapshot),
        "exists": ([], .boolean), "hasChild": ([.string], .boolean), "getPriority": ([], .any),
        "isNumber": ([], .boolean), "isString": ([], .boolean), "isBoolean": ([], .boolean),
        "hasChildren": ([.array], .boolean),  // the argument is optional (see below)
    ]

    /// `query.*` in `.read`: how the client's query is ordered and bounded (null when unused).
    static let queryMembers: [String: RuleType] = [
        "orderByKey": .boolean, "orderByPriority": .boolean, "orderByValue": .boolean, "orderByChild": .any,
        "startAt": .any, "endAt": .any, "equalTo": .any, "limitToFirst": .any, "limitToLast": .any,
    ]

    static let stringMethods: [String: (args: [RuleType], result: RuleType)] = [
        "contains": ([.string], .boolean), "beginsWith": ([.string], .boolean), "endsWith": ([.string], .boolean),
        "replace": ([.string, .string], .string), "toLowerCase": ([], .string), "toUpperCase": ([], .string),
        "matches": ([.regex], .boolean),
    ]

    func type(of e: Expr) throws(TypeError) -> RuleType {
        switch e.kind {
        case .null: return .null
        case .bool: return .boolean
        case .number: return .number
        case .string: return .string
        case .regex:
            throw TypeError(offset: e.offset, message: "a regular expression is only allowed as the argument of matches()")
        case .array:
            throw TypeError(offset: e.offset, message: "an array is only allowed as the argument of hasChildren()")
        case .variable(let name):
            switch name {
            case "auth": return .auth
            case "data", "root": return .snapshot
            case "now": return .number
            case "query":
                guard kind == .read else { throw TypeError(offset: e.offset, message: "query is only available in .read rules") }
                return .query
            case "newData":
                guard kind != .read else { throw TypeError(offset: e.offset, message: "newData is not available in .read rules") }
                return .snapshot
            default:
                if name.hasPrefix("$") {
                    guard captures.contains(name) else {
                        throw TypeError(offset: e.offset, message: "unknown variable \(name): no enclosing \(name) wildcard")
                    }
                    return .string
                }
                throw TypeError(offset: e.offset, message: "unknown variable '\(name)'")
            }
        case .member(let obj, let name):
            let t = try type(of: obj)
            switch t {
            case .auth, .any: return .any
            case .query:
                guard let t = TypeChecker.queryMembers[name] else {
                    throw TypeError(offset: e.offset, message: "query has no member '\(name)'")
                }
                return t
            case .string:
                if name == "length" { return .number }
                if TypeChecker.stringMethods[name] != nil {
                    throw TypeError(offset: e.offset, message: "string method \(name) must be called: \(name)(...)")
                }
                throw TypeError(offset: e.offset, message: "strings have no member '\(name)'")
            case .snapshot:
                if TypeChecker.snapshotMethods[name] != nil {
                    throw TypeError(offset: e.offset, message: "snapshot method \(name) must be called: \(name)()")
                }
                throw TypeError(offset: e.offset, message: "snapshots have no member '\(name)' (use val() or child())")
            default:
                throw TypeError(offset: e.offset, message: "cannot read member '\(name)' of \(t.name)")
            }
        case .index(let obj, let key):
            let t = try type(of: obj)
            let k = try type(of: key)
            guard k == .string || k == .number || k == .any else {
                throw TypeError(offset: key.offset, message: "an index must be a string or number, not \(k.name)")
            }
            guard t == .auth || t == .any else {
                throw TypeError(offset: e.offset, message: "cannot index \(t.name) with []")
            }
            return .any
        case .call(let recv, let name, let args):
            return try call(e, recv, name, args)
        case .unary(let op, let operand):
            let t = try type(of: operand)
            switch op {
            case .not:
                guard t == .boolean || t == .any else { throw mismatch(operand, "!", want: "a boolean", got: t) }
                return .boolean
            case .negate:
                guard t == .number || t == .any else { throw mismatch(operand, "unary -", want: "a number", got: t) }
                return .number
            }
        case .binary(let op, let l, let r):
            return try binary(e, op, l, r)
        case .ternary(let c, let a, let b):
            let ct = try type(of: c)
            guard ct == .boolean || ct == .any else { throw mismatch(c, "?:", want: "a boolean condition", got: ct) }
            let at = try type(of: a), bt = try type(of: b)
            if at == bt { return at }
            if at == .snapshot || bt == .snapshot {
                throw TypeError(offset: e.offset, message: "both branches of ?: must be snapshots if one is")
            }
            return .any
        }
    }

    private func mismatch(_ e: Expr, _ op: String, want: String, got: RuleType) -> TypeError {
        TypeError(offset: e.offset, message: "\(op) needs \(want), but this is \(got.name)")
    }

    private func call(_ e: Expr, _ recv: Expr, _ name: String, _ args: [Expr]) throws(TypeError) -> RuleType {
        let t = try type(of: recv)
        let table: [String: (args: [RuleType], result: RuleType)]
        switch t {
        case .snapshot: table = TypeChecker.snapshotMethods
        case .string, .any: table = TypeChecker.stringMethods  // `any`: a string at run time, or an error
        default:
            throw TypeError(offset: e.offset, message: "cannot call \(name)() on \(t.name)")
        }
        guard let sig = table[name] else {
            let what = t == .snapshot ? "snapshots" : "strings"
            throw TypeError(offset: e.offset, message: "\(what) have no method \(name)()")
        }
        if t == .snapshot && name == "hasChildren" {
            if args.isEmpty { return .boolean }
            guard args.count == 1, case .array(let items) = args[0].kind else {
                throw TypeError(offset: e.offset, message: "hasChildren() takes no argument or one array of keys")
            }
            for item in items {
                let it = try type(of: item)
                guard it == .string || it == .any else {
                    throw TypeError(offset: item.offset, message: "hasChildren() keys must be strings, not \(it.name)")
                }
            }
            return .boolean
        }
        guard args.count == sig.args.count else {
            throw TypeError(offset: e.offset, message: "\(name)() takes \(sig.args.count) argument\(sig.args.count == 1 ? "" : "s"), not \(args.count)")
        }
        for (arg, want) in zip(args, sig.args) {
            if want == .regex {
                guard case .regex = arg.kind else {
                    throw TypeError(offset: arg.offset, message: "matches() takes a regular expression literal /.../")
                }
                continue
            }
            let at = try type(of: arg)
            guard at == want || at == .any else {
                throw TypeError(offset: arg.offset, message: "\(name)() needs \(want.name) argument, not \(at.name)")
            }
        }
        return sig.result
    }

    private func binary(_ e: Expr, _ op: BinaryOp, _ l: Expr, _ r: Expr) throws(TypeError) -> RuleType {
        let lt = try type(of: l), rt = try type(of: r)
        func bad() -> TypeError {
            TypeError(offset: e.offset, message: "operator \(op.rawValue) cannot combine \(lt.name) and \(rt.name)")
        }
        switch op {
        case .add:
            if lt == .number && rt == .number { return .number }
            let ok: Set<RuleType> = [.number, .string, .any]
            guard ok.contains(lt), ok.contains(rt) else { throw bad() }
            if lt == .any || rt == .any { return (lt == .string || rt == .string) ? .string : .any }
            return .string
        case .sub, .mul, .div, .mod:
            guard lt == .number || lt == .any, rt == .number || rt == .any else { throw bad() }
            return .number
        case .eq, .ne, .seq, .sne:
            if lt == .snapshot || rt == .snapshot {
                throw TypeError(offset: e.offset, message: "cannot compare a snapshot with \(op.rawValue); use val() or exists()")
            }
            return .boolean
        case .lt, .le, .gt, .ge:
            let nums = (lt == .number || lt == .any) && (rt == .number || rt == .any)
            let strs = (lt == .string || lt == .any) && (rt == .string || rt == .any)
            guard nums || strs else { throw bad() }
            return .boolean
        case .and, .or:
            guard lt == .boolean || lt == .any else { throw mismatch(l, op.rawValue, want: "a boolean", got: lt) }
            guard rt == .boolean || rt == .any else { throw mismatch(r, op.rawValue, want: "a boolean", got: rt) }
            return .boolean
        }
    }
}
