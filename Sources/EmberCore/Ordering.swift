/// Which value orders the children of a query (reference §3).
public enum QueryIndex: Sendable, Hashable, CustomStringConvertible {
    case priority
    case key
    case value
    case child(Path)

    /// The wire form (`i` of the query object): `.key`, `.value`, a child path; priority is `.priority`.
    public var wireName: String {
        switch self {
        case .priority: return ".priority"
        case .key: return ".key"
        case .value: return ".value"
        case .child(let p): return p.segments.joined(separator: "/")
        }
    }

    /// The REST `orderBy` form.
    public var description: String {
        switch self {
        case .priority: return "$priority"
        case .key: return "$key"
        case .value: return "$value"
        case .child(let p): return p.segments.joined(separator: "/")
        }
    }

    /// The value of `node` (a child of the query location) under this index.
    public func indexValue(of node: Node) -> IndexValue {
        switch self {
        case .key: return .null
        case .priority: return IndexValue(priority: node.priority)
        case .value: return IndexValue(node: node)
        case .child(let p): return IndexValue(node: node.child(at: p))
        }
    }

    /// Orders two named children: index value, then key.
    public func compare(_ a: (key: String, node: Node), _ b: (key: String, node: Node)) -> Int {
        if self != .key {
            let c = indexValue(of: a.node).compare(indexValue(of: b.node))
            if c != 0 { return c }
        }
        return KeyOrder.compare(a.key, b.key)
    }
}

/// A value as an index sees it: null < false < true < numbers < strings < objects (all equal).
public enum IndexValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case object

    public init(node: Node) {
        if let leaf = node.leaf {
            switch leaf {
            case .bool(let b): self = .bool(b)
            case .int(let i): self = .number(Double(i))
            case .double(let d): self = .number(d)
            case .string(let s): self = .string(s)
            }
        } else if node.hasChildren {
            self = .object
        } else {
            self = .null
        }
    }

    public init(priority: Priority?) {
        switch priority {
        case nil: self = .null
        case .number(let d)?: self = .number(d)
        case .string(let s)?: self = .string(s)
        }
    }

    /// A JSON primitive used as a query bound; objects and arrays are not bounds.
    public init?(json: JSON) {
        switch json {
        case .null: self = .null
        case .bool(let b): self = .bool(b)
        case .int(let i): self = .number(Double(i))
        case .double(let d): self = .number(d)
        case .string(let s): self = .string(s)
        default: return nil
        }
    }

    public var json: JSON {
        switch self {
        case .null, .object: return .null
        case .bool(let b): return .bool(b)
        case .number(let d): return .double(d)
        case .string(let s): return .string(s)
        }
    }

    var rank: Int {
        switch self {
        case .null: return 0
        case .bool(false): return 1
        case .bool(true): return 2
        case .number: return 3
        case .string: return 4
        case .object: return 5
        }
    }

    public func compare(_ other: IndexValue) -> Int {
        let r1 = rank, r2 = other.rank
        if r1 != r2 { return r1 < r2 ? -1 : 1 }
        switch (self, other) {
        case let (.number(a), .number(b)): return a < b ? -1 : (a > b ? 1 : 0)
        case let (.string(a), .string(b)): return KeyOrder.compareText(a, b)
        default: return 0
        }
    }
}
