import EmberCore

extension RulesEngine {
    /// The `query` object of read rules. An equal start and end bound is `equalTo`.
    static func queryValue(_ q: QuerySpec?) -> Value {
        func json(_ v: IndexValue?) -> JSON {
            switch v {
            case .bool(let b)?: return .bool(b)
            case .number(let d)?: return .double(d)
            case .string(let s)?: return .string(s)
            case .null?, .object?, nil: return .null
            }
        }
        let spec = q ?? .default
        let explicit = !spec.isDefault
        var o: KeyMap<JSON> = [
            "orderByKey": .bool(spec.index == .key),
            "orderByPriority": .bool(explicit && spec.index == .priority),
            "orderByValue": .bool(spec.index == .value),
            "orderByChild": .null,
            "startAt": json(spec.start?.value), "endAt": json(spec.end?.value), "equalTo": .null,
            "limitToFirst": spec.limit.map { spec.limitFromStart ? .int(Int64($0)) : .null } ?? .null,
            "limitToLast": spec.limit.map { spec.limitFromStart ? .null : .int(Int64($0)) } ?? .null,
        ]
        if case .child(let p) = spec.index { o["orderByChild"] = .string(p.segments.joined(separator: "/")) }
        if let s = spec.start, let e = spec.end, s == e { o["equalTo"] = json(s.value) }
        return .compound(.object(o))
    }
}
