/// One end of a query range: an index value with an optional key tie-break.
public struct QueryBound: Sendable, Hashable {
    public var value: IndexValue
    /// Tie-break key; nil means MIN_NAME for a start and MAX_NAME for an end.
    public var name: String?
    public var inclusive: Bool

    public init(value: IndexValue, name: String? = nil, inclusive: Bool = true) {
        self.value = value
        self.name = name
        self.inclusive = inclusive
    }
}

/// Query parameters: an index, an optional range and an optional limit from either side.
/// The range applies first; the limit then takes the first or last children of what is left.
public struct QuerySpec: Sendable, Hashable, CustomStringConvertible {
    public var index: QueryIndex
    public var start: QueryBound?
    public var end: QueryBound?
    public var limit: Int?
    /// true: limitToFirst (view from the left); false: limitToLast.
    public var limitFromStart: Bool

    public static let `default` = QuerySpec()

    public init(index: QueryIndex = .priority, start: QueryBound? = nil, end: QueryBound? = nil,
                limit: Int? = nil, limitFromStart: Bool = true) {
        self.index = index
        self.start = start
        self.end = end
        self.limit = limit
        self.limitFromStart = limitFromStart
    }

    /// A query with no range and no limit sees all children (its order matters only to clients).
    public var loadsAllData: Bool { start == nil && end == nil && limit == nil }
    public var isDefault: Bool { loadsAllData && index == .priority }
    public var hasRange: Bool { start != nil || end != nil }

    // MARK: - Builders mirroring the SDK (startAfter/endBefore as in reference §6.4)

    public func starting(at value: IndexValue, key: String? = nil) -> QuerySpec {
        var q = self
        q.start = QueryBound(value: value, name: key, inclusive: true)
        return q
    }

    public func starting(after value: IndexValue, key: String? = nil) -> QuerySpec {
        var q = self
        let name = (index == .key || key != nil) ? key : KeyOrder.maxName
        q.start = QueryBound(value: value, name: name, inclusive: false)
        return q
    }

    public func ending(at value: IndexValue, key: String? = nil) -> QuerySpec {
        var q = self
        q.end = QueryBound(value: value, name: key, inclusive: true)
        return q
    }

    public func ending(before value: IndexValue, key: String? = nil) -> QuerySpec {
        var q = self
        let name = (index == .key || key != nil) ? key : KeyOrder.minName
        q.end = QueryBound(value: value, name: name, inclusive: false)
        return q
    }

    public func equal(to value: IndexValue, key: String? = nil) -> QuerySpec {
        starting(at: value, key: key).ending(at: value, key: key)
    }

    public func limited(toFirst n: Int) -> QuerySpec {
        var q = self
        q.limit = n
        q.limitFromStart = true
        return q
    }

    public func limited(toLast n: Int) -> QuerySpec {
        var q = self
        q.limit = n
        q.limitFromStart = false
        return q
    }

    // MARK: - Evaluation

    /// (index value, key) of a bound, with the sentinel default for a missing key. Under the key
    /// index the bound's value is the key itself.
    private func post(_ b: QueryBound, isStart: Bool) -> (IndexValue, String) {
        if index == .key {
            if case .string(let s) = b.value { return (.null, s) }
            return (.null, isStart ? KeyOrder.minName : KeyOrder.maxName)
        }
        return (b.value, b.name ?? (isStart ? KeyOrder.minName : KeyOrder.maxName))
    }

    private func comparePost(_ v: IndexValue, _ key: String, _ p: (IndexValue, String)) -> Int {
        if index != .key {
            let c = v.compare(p.0)
            if c != 0 { return c }
        }
        return KeyOrder.compare(key, p.1)
    }

    /// Whether a child lies inside the range (ignoring the limit).
    public func inRange(key: String, node: Node) -> Bool {
        let v = index.indexValue(of: node)
        if let start {
            let c = comparePost(v, key, post(start, isStart: true))
            if start.inclusive ? c < 0 : c <= 0 { return false }
        }
        if let end {
            let c = comparePost(v, key, post(end, isStart: false))
            if end.inclusive ? c > 0 : c >= 0 { return false }
        }
        return true
    }

    /// Sorts `node`'s children by this query's index.
    public func sortedChildren(of node: Node) -> [(key: String, node: Node)] {
        let idx = index
        if idx == .key {
            return node.sortedKeys.map { ($0, node.children[$0]!) }
        }
        let decorated = node.children.map { (key: $0.key, node: $0.value, iv: idx.indexValue(of: $0.value)) }
        return decorated.sorted { a, b in
            let c = a.iv.compare(b.iv)
            if c != 0 { return c < 0 }
            return KeyOrder.compare(a.key, b.key) < 0
        }.map { ($0.key, $0.node) }
    }

    /// The children of `node` inside this query's window, in index order.
    public func window(of node: Node) -> [(key: String, node: Node)] {
        var result = sortedChildren(of: node)
        if hasRange { result = result.filter { inRange(key: $0.key, node: $0.node) } }
        if let limit, result.count > limit {
            result = limitFromStart ? Array(result.prefix(limit)) : Array(result.suffix(limit))
        }
        return result
    }

    /// The query result as a node: the window's children; the location's own priority is dropped
    /// when the query filters (spec §3.5), kept for a query that loads all data.
    public func apply(to node: Node) -> Node {
        if node.isLeaf { return loadsAllData ? node : .empty }
        if loadsAllData { return node }
        var kids: KeyMap<Node> = [:]
        for (k, n) in window(of: node) { kids[k] = n }
        return Node(children: kids)
    }

    public var description: String { wireObject.serialized() }

    // MARK: - Wire form (reference §6.4)

    /// The `q` object of a listen (`sp sn sin ep en ein l vf i`).
    public var wireObject: JSON {
        var o: KeyMap<JSON> = [:]
        if let start {
            o["sp"] = start.value.json
            if let n = start.name { o["sn"] = .string(n) }
            o["sin"] = .bool(start.inclusive)
        }
        if let end {
            o["ep"] = end.value.json
            if let n = end.name { o["en"] = .string(n) }
            o["ein"] = .bool(end.inclusive)
        }
        if let limit {
            o["l"] = .int(Int64(limit))
            o["vf"] = .string(limitFromStart ? "l" : "r")
        }
        if index != .priority { o["i"] = .string(index.wireName) }
        return .object(o)
    }

    /// Parses the `q` object of a listen or get.
    public init(wire: JSON) throws(EmberError) {
        guard case .object(let o) = wire else { throw .invalidQuery("query must be an object") }
        self.init()
        if let i = o["i"] {
            guard let s = i.stringValue else { throw .invalidQuery("bad index") }
            switch s {
            case ".key": index = .key
            case ".value": index = .value
            case ".priority": index = .priority
            default: index = .child(try Path(s))
            }
        }
        func bound(_ v: String, _ n: String, _ inc: String) throws(EmberError) -> QueryBound? {
            guard let raw = o[v] else { return nil }
            guard let value = IndexValue(json: raw) else {
                throw .invalidQuery("Constraint index field must be a JSON primitive")
            }
            var name: String? = nil
            if let nj = o[n] {
                guard let s = nj.stringValue else { throw .invalidQuery("bound name must be a string") }
                name = s
            }
            var inclusive = true
            if case .bool(let b)? = o[inc] { inclusive = b }
            return QueryBound(value: value, name: name, inclusive: inclusive)
        }
        start = try bound("sp", "sn", "sin")
        end = try bound("ep", "en", "ein")
        if let l = o["l"] {
            guard case .int(let n) = l, n >= 0, n <= Int64(Int32.max) else { throw .invalidQuery("bad limit") }
            limit = Int(n)
            limitFromStart = o["vf"]?.stringValue != "r"
        }
    }
}
