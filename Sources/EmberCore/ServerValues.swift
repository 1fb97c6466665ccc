/// Server values (`{".sv": "timestamp"}`, `{".sv": {"increment": n}}`), resolved when a write is
/// applied against the data that exists then. `now` is fixed in the log entry so replays agree.
public enum ServerValues {
    /// Replaces every placeholder in `json` (to be written where `existing` is now).
    public static func resolve(_ json: JSON, existing: Node, now: Int64) throws(EmberError) -> JSON {
        switch json {
        case .object(let o):
            if let sv = o[".sv"] {
                return try evaluate(sv, existing: existing, now: now)
            }
            var out: KeyMap<JSON> = [:]
            out.reserveCapacity(o.count)
            for (k, v) in o {
                if k == ".priority" {
                    out[k] = try resolve(v, existing: Node.empty, now: now)
                } else if k == ".value" {
                    out[k] = try resolve(v, existing: existing, now: now)
                } else {
                    out[k] = try resolve(v, existing: existing.child(k), now: now)
                }
            }
            return .object(out)
        case .array(let a):
            var out: [JSON] = []
            out.reserveCapacity(a.count)
            for (i, v) in a.enumerated() { out.append(try resolve(v, existing: existing.child(String(i)), now: now)) }
            return .array(out)
        default:
            return json
        }
    }

    /// True when `json` holds any placeholder (lets writers skip the resolve pass).
    public static func containsPlaceholder(_ json: JSON) -> Bool {
        switch json {
        case .object(let o): return (Node.hasDotKey(o) && o[".sv"] != nil) || o.values.contains(where: containsPlaceholder)
        case .array(let a): return a.contains(where: containsPlaceholder)
        default: return false
        }
    }

    static func evaluate(_ sv: JSON, existing: Node, now: Int64) throws(EmberError) -> JSON {
        switch sv {
        case .string("timestamp"):
            return .int(now)
        case .object(let o) where o.count == 1 && o["increment"] != nil:
            let delta = o["increment"]!
            switch (existing.leaf, delta) {
            case let (.int(a)?, .int(b)):
                let (sum, overflow) = a.addingReportingOverflow(b)
                // Integer overflow is computed as a double (Firebase increment docs).
                return overflow ? .double(Double(a) + Double(b)) : .int(sum)
            case let (.int(a)?, .double(b)): return .double(Double(a) + b)
            case let (.double(a)?, .int(b)): return .double(a + Double(b))
            case let (.double(a)?, .double(b)): return .double(a + b)
            case (_, .int), (_, .double): return delta  // missing or non-numeric: the delta
            default: throw .unrecognizedServerValue("increment needs a number")
            }
        default:
            throw .unrecognizedServerValue(sv.serialized())
        }
    }
}
