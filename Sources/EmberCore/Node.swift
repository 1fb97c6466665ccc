/// A primitive value. Numbers keep exact 64-bit integers apart from doubles, but compare by value:
/// `1` equals `1.0`.
public enum Leaf: Sendable, Hashable {
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)

    public static func == (lhs: Leaf, rhs: Leaf) -> Bool {
        switch (lhs, rhs) {
        case let (.bool(a), .bool(b)): return a == b
        // Byte equality: canonically equivalent strings ("é", "e\u{301}") are different values.
        // `isExactly`: lengths, then the contiguous buffers (a walk through two UTF8Views was a
        // share of every member's apply: each set asks whether it changes anything).
        case let (.string(a), .string(b)): return a.isExactly(b)
        case let (.int(a), .int(b)): return a == b
        case let (.int(a), .double(b)), let (.double(b), .int(a)): return Double(a) == b
        case let (.double(a), .double(b)): return a == b
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .bool(let b): hasher.combine(0); hasher.combine(b)
        case .string(let s): hasher.combine(2); hasher.combine(s)
        case .int(let i): hasher.combine(1); hasher.combine(Double(i))
        case .double(let d): hasher.combine(1); hasher.combine(d)
        }
    }

    public var json: JSON {
        switch self {
        case .bool(let b): return .bool(b)
        case .int(let i): return .int(i)
        case .double(let d): return .double(d)
        case .string(let s): return .string(s)
        }
    }

    /// The number as a double, for ordering and hashing (Firebase compares numbers as doubles).
    public var doubleValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }
}

/// A node's priority: a number (IEEE double) or a string. Absence is `nil`.
public enum Priority: Sendable, Hashable {
    case number(Double)
    case string(String)

    public var json: JSON {
        switch self {
        case .number(let d): return .double(d)
        case .string(let s): return .string(s)
        }
    }

    /// Byte equality for strings, as `Leaf`'s (hashing stays consistent: byte-equal strings
    /// hash alike).
    public static func == (a: Priority, b: Priority) -> Bool {
        switch (a, b) {
        case let (.number(x), .number(y)): return x == y
        case let (.string(x), .string(y)): return x.isExactly(y)
        default: return false
        }
    }

    public init?(json: JSON) throws(EmberError) {
        switch json {
        case .null: return nil
        case .int(let i): self = .number(Double(i))
        case .double(let d): self = .number(d)
        case .string(let s):
            guard s.utf8.count <= Limits.maxKeyBytes else { throw .invalidPriority("string priorities are at most 768 bytes") }
            self = .string(s)
        default: throw .invalidPriority("a priority must be a number, a string or null")
        }
    }
}

/// An immutable JSON tree node with Firebase semantics: a leaf, or children (never an empty
/// object), each optionally with a priority. The empty node is "no data" and has no priority.
public struct Node: Sendable, Equatable {
    public private(set) var leaf: Leaf?
    public private(set) var children: KeyMap<Node>
    public private(set) var priority: Priority?

    public static let empty = Node()

    public init() {
        leaf = nil
        children = [:]
        priority = nil
    }

    public init(_ leaf: Leaf, priority: Priority? = nil) {
        self.leaf = leaf
        self.children = [:]
        self.priority = priority
    }

    /// Empty children are dropped; with none left the node is empty (and loses its priority).
    public init(children: KeyMap<Node>, priority: Priority? = nil) {
        self.leaf = nil
        // Most callers pass no empty child (JSON conversion, storage reads): a look, not a
        // filtered copy of the map (a copy of every object's children in a bulk write).
        self.children = children.values.contains(where: \.isEmpty) ? children.filter { !$0.value.isEmpty } : children
        self.priority = self.children.isEmpty ? nil : priority
    }

    /// `children` holds no empty node (the caller dropped them): nothing to look for.
    private init(nonEmptyChildren children: KeyMap<Node>, priority: Priority?) {
        self.leaf = nil
        self.children = children
        self.priority = children.isEmpty ? nil : priority
    }

    public var isEmpty: Bool { leaf == nil && children.isEmpty }
    public var isLeaf: Bool { leaf != nil }
    public var hasChildren: Bool { !children.isEmpty }
    public var childCount: Int { children.count }

    /// Children keys in Firebase key order.
    public var sortedKeys: [String] { children.keys.sorted(by: KeyOrder.less) }

    public func child(_ key: String) -> Node { children[key] ?? .empty }

    public func child(at path: Path) -> Node {
        var node = self
        for key in path.segments {
            guard let next = node.children[key] else { return .empty }
            node = next
        }
        return node
    }

    public func withPriority(_ p: Priority?) -> Node {
        var copy = self
        copy.priority = isEmpty ? nil : p
        return copy
    }

    /// Replaces the node at `path` with `node`, creating parents and pruning parents left empty.
    /// Writing under a leaf replaces that leaf with an object (Firebase semantics).
    public func setting(_ node: Node, at path: Path) -> Node {
        var copy = self
        copy.set(node, at: path.segments[...])
        return copy
    }

    public mutating func set(_ node: Node, at path: Path) {
        set(node, at: path.segments[...])
    }

    private mutating func set(_ node: Node, at path: ArraySlice<String>) {
        guard let key = path.first else {
            self = node
            return
        }
        if leaf != nil {
            // Deleting below a leaf changes nothing (JS `LeafNode.updateChild`).
            if node.isEmpty { return }
            // A leaf written under becomes an object that keeps the leaf's priority (SDK spec tests 83–85).
            leaf = nil
        }
        // In place (KeyMap's `_modify`): a child copied out and stored back would share its
        // children with the parent while it is changed, and copy them on every set (a bulk
        // update of N parts one level down copied an N-child map N times).
        children[key, default: .empty].set(node, at: path.dropFirst())
        if children[key]?.isEmpty ?? true {
            children.removeValue(forKey: key)
            if children.isEmpty { priority = nil }
        }
    }

    /// Applies a multi-path update (relative paths → new nodes), atomically as one value.
    public func updating(_ updates: [(Path, Node)]) -> Node {
        var copy = self
        for (path, node) in updates { copy.set(node, at: path) }
        return copy
    }

    /// `Node.empty.updating(parts)` for parts in path order none of which is the root or lies at
    /// or below another (a checked multi-path update's, sorted): built level by level, each map
    /// made at its size, instead of a descent, a uniqueness check and a growing map per part (a
    /// bulk update's patch was ~5 % of the writer thread's time in an import).
    public static func assembling(_ parts: [(Path, Node)]) -> Node {
        assert(parts.allSatisfy { !$0.0.isRoot }, "a part at the root")
        assert(zip(parts, parts.dropFirst()).allSatisfy { $0.0.0 < $0.1.0 && !$0.0.0.contains($0.1.0) }, "parts out of order or nested")
        return assemble(parts[...], level: 0)
    }

    /// The node at depth `level` that `parts` (sharing their first `level` keys, each deeper)
    /// make. In path order, the parts under one key are consecutive.
    private static func assemble(_ parts: ArraySlice<(Path, Node)>, level: Int) -> Node {
        var groups = 0
        var i = parts.startIndex
        while i < parts.endIndex {
            let key = parts[i].0.segments[level]
            i += 1
            while i < parts.endIndex && parts[i].0.segments[level].isExactly(key) { i += 1 }
            groups += 1
        }
        var kids = KeyMap<Node>(minimumCapacity: groups)
        i = parts.startIndex
        while i < parts.endIndex {
            let key = parts[i].0.segments[level]
            var j = i + 1
            while j < parts.endIndex && parts[j].0.segments[level].isExactly(key) { j += 1 }
            // A part exactly here is alone under its key (none lies below another).
            let child = j == i + 1 && parts[i].0.count == level + 1 ? parts[i].1 : assemble(parts[i..<j], level: level + 1)
            if !child.isEmpty { kids[key] = child }
            i = j
        }
        return Node(nonEmptyChildren: kids, priority: nil)
    }

    /// Number of nodes (leaves and objects) in the tree, for limits.
    public var nodeCount: Int {
        if isEmpty { return 0 }
        return 1 + children.values.reduce(0) { $0 + $1.nodeCount }
    }
}

// MARK: - JSON conversion

extension Node {
    /// Builds a node from client JSON at absolute depth `depth` (the depth of the location being
    /// written). Validates keys, depth, string sizes, `.priority` and `.value`. Server values must
    /// already be resolved (`ServerValues.resolve`); a remaining `.sv` is an error.
    public init(json: JSON, depth: Int = 0) throws(EmberError) {
        self = try Node.convert(json, depth: depth)
    }

    private static func convert(_ json: JSON, depth: Int) throws(EmberError) -> Node {
        switch json {
        case .null: return .empty
        case .bool(let b): return Node(.bool(b))
        case .int(let i): return Node(.int(i))
        case .double(let d):
            guard d.isFinite else { throw .invalidData("numbers must be finite") }
            return Node(.double(d))
        case .string(let s):
            let n = s.utf8.count
            guard n <= Limits.maxStringBytes else { throw .stringTooLong(bytes: n) }
            return Node(.string(s))
        case .array(let items):
            var kids: KeyMap<Node> = [:]
            if !items.isEmpty { try checkDepth(depth + 1) }
            for (idx, item) in items.enumerated() {
                let child = try convert(item, depth: depth + 1)
                if !child.isEmpty { kids[String(idx)] = child }
            }
            return Node(nonEmptyChildren: kids, priority: nil)
        case .object(let obj):
            // Most objects have no key starting with "." (no `.priority`, `.value` or `.sv`):
            // their keys are checked in one look over them, and their children's map is the
            // members' map with each value converted (`mapValues` keeps its hash table: no key is
            // hashed and inserted again; that was ~a third of building an import's nodes).
            if try checkPlainKeys(obj) {
                var empty = 0
                let kids: KeyMap<Node>
                do {
                    kids = try obj.mapValues { value in
                        let child = try convert(value, depth: depth + 1)
                        if child.isEmpty { empty += 1 }
                        return child
                    }
                } catch let e as EmberError { throw e } catch { preconditionFailure("Node.convert throws EmberError only") }
                if empty < obj.count { try checkDepth(depth + 1) }
                return Node(nonEmptyChildren: empty == 0 ? kids : kids.filter { !$0.value.isEmpty }, priority: nil)
            }
            var priority: Priority? = nil
            // Three lookups only for an object that has a key starting with "." (most have none).
            do {
                if let p = obj[".priority"] { priority = try Priority(json: p) }
                if obj[".sv"] != nil { throw .unrecognizedServerValue("unresolved server value") }
                if let v = obj[".value"] {
                    for key in obj.keys where key != ".value" && key != ".priority" { _ = key; throw .invalidValueKey }
                    let inner = try convert(v, depth: depth)
                    // `.value` carries a primitive in Firebase's export format; an object is accepted too.
                    return inner.withPriority(priority ?? inner.priority)
                }
            }
            var kids: KeyMap<Node> = [:]
            kids.reserveCapacity(obj.count)
            for (key, value) in obj where key != ".priority" {
                try Key.validate(key)
                let child = try convert(value, depth: depth + 1)
                if !child.isEmpty {
                    try checkDepth(depth + 1)
                    kids[key] = child
                }
            }
            return Node(nonEmptyChildren: kids, priority: priority)
        }
    }

    /// `Node(json:depth:)`'s checks without building the node: the same walk in the same order,
    /// so it throws what that throws; returns whether the node would be empty. For a caller that
    /// only validates (`ImportSplitter`'s parts, before they are sent): building each part's node
    /// and freeing it was ~19 % of `ember import`'s CPU.
    public static func validate(json: JSON, depth: Int = 0) throws(EmberError) -> Bool {
        switch json {
        case .null: return true
        case .bool, .int: return false
        case .double(let d):
            guard d.isFinite else { throw .invalidData("numbers must be finite") }
            return false
        case .string(let s):
            let n = s.utf8.count
            guard n <= Limits.maxStringBytes else { throw .stringTooLong(bytes: n) }
            return false
        case .array(let items):
            if !items.isEmpty { try checkDepth(depth + 1) }
            var empty = true
            for item in items where !(try validate(json: item, depth: depth + 1)) { empty = false }
            return empty
        case .object(let obj):
            // In `convert`'s order: the keys, then the values, then the depth of a non-empty child.
            if try checkPlainKeys(obj) {
                var empty = true
                for value in obj.values where !(try validate(json: value, depth: depth + 1)) { empty = false }
                if !empty { try checkDepth(depth + 1) }
                return empty
            }
            do {
                if let p = obj[".priority"] { _ = try Priority(json: p) }
                if obj[".sv"] != nil { throw .unrecognizedServerValue("unresolved server value") }
                if let v = obj[".value"] {
                    for key in obj.keys where key != ".value" && key != ".priority" { _ = key; throw .invalidValueKey }
                    return try validate(json: v, depth: depth)
                }
            }
            var empty = true
            for (key, value) in obj where key != ".priority" {
                try Key.validate(key)
                if !(try validate(json: value, depth: depth + 1)) {
                    try checkDepth(depth + 1)
                    empty = false
                }
            }
            return empty
        }
    }

    /// True when no key of `obj` starts with "." (`.priority`, `.value`, `.sv`, or a key the
    /// checks refuse), each of them checked (`Key.validate`) on the way; false at the first that
    /// does (the keys after it are left for the member-by-member walk).
    @inline(__always)
    static func checkPlainKeys(_ obj: KeyMap<JSON>) throws(EmberError) -> Bool {
        for key in obj.keys {
            if key.utf8.first == UInt8(ascii: ".") { return false }
            try Key.validate(key)
        }
        return true
    }

    /// Whether a member's key starts with "." (`.priority`, `.value`, `.sv`, or a key the checks
    /// refuse): without one, none of those lookups can find anything (each hashes its key).
    @inlinable
    public static func hasDotKey(_ obj: KeyMap<JSON>) -> Bool {
        obj.keys.contains { $0.utf8.first == UInt8(ascii: ".") }
    }

    private static func checkDepth(_ d: Int) throws(EmberError) {
        if d > Limits.maxPathDepth { throw .pathTooDeep(depth: d) }
    }

    /// The value as Firebase returns it: priorities dropped, array-like objects as arrays.
    public func toJSON() -> JSON {
        if let leaf { return leaf.json }
        if children.isEmpty { return .null }
        if let array = arrayForm() { return .array(array) }
        var obj: KeyMap<JSON> = [:]
        obj.reserveCapacity(children.count)
        for (k, v) in children { obj[k] = v.toJSON() }
        return .object(obj)
    }

    /// `format=export`: priorities included (`.value` / `.priority`), never arrays.
    public func exportJSON() -> JSON {
        if let leaf {
            guard let priority else { return leaf.json }
            return .object([".value": leaf.json, ".priority": priority.json])
        }
        if children.isEmpty { return .null }
        var obj: KeyMap<JSON> = [:]
        for (k, v) in children { obj[k] = v.exportJSON() }
        if let priority { obj[".priority"] = priority.json }
        return .object(obj)
    }

    /// JS `ChildrenNode.val()`: every key a canonical non-negative integer and maxKey < 2 × count.
    private func arrayForm() -> [JSON]? {
        var maxKey = -1
        for key in children.keys {
            guard let n = Node.arrayIndex(key) else { return nil }
            maxKey = max(maxKey, n)
        }
        guard maxKey < 2 * children.count else { return nil }
        var result = [JSON](repeating: .null, count: maxKey + 1)
        for (k, v) in children { result[Node.arrayIndex(k)!] = v.toJSON() }
        return result
    }

    /// `^(0|[1-9]\d*)$`, bounded so the array stays small.
    public static func arrayIndex(_ key: String) -> Int? {
        let u = Array(key.utf8)
        guard !u.isEmpty, u.count <= 9 else { return nil }
        if u.count > 1 && u[0] == 48 { return nil }
        var v = 0
        for c in u {
            guard c >= 48 && c <= 57 else { return nil }
            v = v * 10 + Int(c - 48)
        }
        return v
    }
}

// MARK: - Exact identity

extension Leaf {
    /// Same type and same bits: unlike `==`, `1` and `1.0` differ. Storage uses this to decide
    /// whether a write changed anything, so `Int64.max` → `9.223372036854775808e18` is a change.
    public func isIdentical(to other: Leaf) -> Bool {
        switch (self, other) {
        case let (.int(a), .int(b)): return a == b
        case let (.double(a), .double(b)): return a.bitPattern == b.bitPattern
        case (.int, .double), (.double, .int): return false
        default: return self == other
        }
    }
}

extension Node {
    /// Structural identity with exact leaf types (see `Leaf.isIdentical`).
    public func isIdentical(to other: Node) -> Bool {
        guard priority == other.priority, children.count == other.children.count else { return false }
        switch (leaf, other.leaf) {
        case (nil, nil): break
        case let (a?, b?): if !a.isIdentical(to: b) { return false }
        default: return false
        }
        for (k, v) in children {
            guard let o = other.children[k], v.isIdentical(to: o) else { return false }
        }
        return true
    }
}
