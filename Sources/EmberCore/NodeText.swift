/// Nodes built straight from JSON text (issue 42): a bulk update's parts travel in the log as
/// their text, and every replica builds the nodes from it without a `JSON` tree in between (the
/// tree, decoded or parsed, was built, converted and freed per part: a quarter of a follower's
/// writer thread in an import).
extension Node {
    /// The node `Node(json: JSON.parse(bytes[range]), depth:)` builds, and what that throws.
    /// `jsonDepth`: the containers the text lies in (a PATCH body's part lies in one), counted
    /// against `Limits.maxJSONDepth` as the body's parse counted them.
    ///
    /// The direct walk takes plain objects, arrays, primitives and `.priority` / `.value`
    /// members; anything it refuses (malformed text, a refused key or value, a `.sv`) is handed
    /// to the tree path, so a refusal is that path's error word for word (and a value the walk
    /// wrongly refused would still build, only slower).
    public init(jsonText bytes: [UInt8], range: Range<Int>, depth: Int = 0, jsonDepth: Int = 0) throws(EmberError) {
        if let node = Self.walked(bytes, range: range, depth: depth, jsonDepth: jsonDepth) {
            self = node
            return
        }
        var tree = JSONParser(bytes: bytes, range: range, maxDepth: Limits.maxJSONDepth - jsonDepth)
        self = try Node(json: tree.parseDocument(), depth: depth)
    }

    /// The direct walk alone: nil where it hands over to the tree path.
    static func walked(_ bytes: [UInt8], range: Range<Int>, depth: Int, jsonDepth: Int) -> Node? {
        var walk = JSONParser(bytes: bytes, range: range, maxDepth: Limits.maxJSONDepth - jsonDepth)
        do throws(EmberError) {
            walk.skipWhitespace()
            var count = 0
            let node = try walk.node(nesting: 0, depth: depth, count: &count)
            walk.skipWhitespace()
            return walk.i == walk.end ? node : nil
        } catch {
            return nil
        }
    }

    public init(jsonText bytes: [UInt8], depth: Int = 0) throws(EmberError) {
        try self.init(jsonText: bytes, range: 0..<bytes.count, depth: depth)
    }
}

extension JSONParser {
    /// One value as a node at path depth `depth`, inside `nesting` containers of this text.
    /// Throws on anything `Node.convert` would not take as this walk takes it (the caller then
    /// runs the tree path): the checks are `Node.convert`'s, in whatever order they come.
    /// `count` grows by the nodes `WriteValidation.countNodes` counts for the value (a member
    /// written twice counts twice: never less than the front's count).
    /// `build` false: the same checks, nothing built (a front whose store builds the nodes from
    /// the text itself, `UpdateText.scan`): an object or array answers `.empty` when it would be
    /// empty and `Self.checkedMark` otherwise; a primitive answers its node (no allocation).
    mutating func node(nesting: Int, depth: Int, count: inout Int, build: Bool = true) throws(EmberError) -> Node {
        guard i < end else { throw fail("unexpected end") }
        switch bytes[i] {
        case UInt8(ascii: "{"): return try objectNode(nesting: nesting + 1, depth: depth, count: &count, build: build)
        case UInt8(ascii: "["): return try arrayNode(nesting: nesting + 1, depth: depth, count: &count, build: build)
        case UInt8(ascii: "n"): try expect("null"); return .empty
        default: break
        }
        count += 1
        switch bytes[i] {
        case UInt8(ascii: "\""):
            let s = try parseString()
            guard s.utf8.count <= Limits.maxStringBytes else { throw .stringTooLong(bytes: s.utf8.count) }
            return Node(.string(s))
        case UInt8(ascii: "t"): try expect("true"); return Node(.bool(true))
        case UInt8(ascii: "f"): try expect("false"); return Node(.bool(false))
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            switch try parseNumber() {
            case .int(let v): return Node(.int(v))
            case .double(let d): return Node(.double(d))  // finite: `parseNumber` refuses the rest
            default: throw fail("bad number")
            }
        default: throw fail("unexpected character")
        }
    }

    /// What a check-only walk (`build` false) answers for a non-empty object or array.
    static let checkedMark = Node(.bool(true))

    private static func checkDepth(_ d: Int) throws(EmberError) {
        if d > Limits.maxPathDepth { throw .pathTooDeep(depth: d) }
    }

    private mutating func arrayNode(nesting: Int, depth: Int, count: inout Int, build: Bool) throws(EmberError) -> Node {
        guard nesting <= maxDepth else { throw fail("nesting too deep") }
        count += 1
        i += 1
        skipWhitespace()
        if i < end && bytes[i] == UInt8(ascii: "]") { i += 1; return .empty }
        // `Node.convert`: a non-empty array's items lie one level down, null or not.
        try Self.checkDepth(depth + 1)
        var kids = KeyMap<Node>(minimumCapacity: build ? 4 : 0)
        var anyKid = false
        var index = 0
        while true {
            skipWhitespace()
            let child = try node(nesting: nesting, depth: depth + 1, count: &count, build: build)
            if !child.isEmpty {
                anyKid = true
                if build { kids[String(index)] = child }
            }
            index += 1
            skipWhitespace()
            guard i < end else { throw fail("unexpected end") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "]") {
                i += 1
                return build ? Node(children: kids) : anyKid ? Self.checkedMark : .empty
            }
            throw fail("expected ',' or ']'")
        }
    }

    private mutating func objectNode(nesting: Int, depth: Int, count: inout Int, build: Bool) throws(EmberError) -> Node {
        guard nesting <= maxDepth else { throw fail("nesting too deep") }
        let start = i
        // One for the object; a `.value` object counts as its value alone.
        let before = count
        var valueCount = 0
        count += 1
        i += 1
        skipWhitespace()
        if i < end && bytes[i] == UInt8(ascii: "}") { i += 1; return .empty }
        var kids = KeyMap<Node>(minimumCapacity: build ? 4 : 0)
        // Not building: members whose value is not empty, and whether any was empty (then a
        // repeated key could make the object empty after all: the building walk decides).
        var nonEmpty = 0, anyEmpty = false
        // `.priority` and `.value` (the last of each, as the parse keeps the last of a key);
        // whether any other key was met (a `.value` object may have none, null-valued or not).
        var priority: JSON? = nil
        var value: Node? = nil
        var otherKey = false
        while true {
            skipWhitespace()
            guard i < end, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected key") }
            let key = try parseString()
            skipWhitespace()
            guard i < end, bytes[i] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            i += 1
            skipWhitespace()
            if key.utf8.first == UInt8(ascii: ".") {
                switch key {
                case ".priority": priority = try parseValue(depth: nesting)
                // `.value`'s node lies at this object's own depth.
                case ".value":
                    let at = count
                    value = try node(nesting: nesting, depth: depth, count: &count, build: build)
                    valueCount = count - at
                default: throw EmberError.invalidValueKey  // `.sv` or a refused key: the tree path says which
                }
            } else {
                try Key.validate(key)
                otherKey = true
                let child = try node(nesting: nesting, depth: depth + 1, count: &count, build: build)
                if build {
                    if child.isEmpty { kids.removeValue(forKey: key) } else { kids[key] = child }
                } else if child.isEmpty {
                    anyEmpty = true
                } else {
                    nonEmpty += 1
                }
            }
            skipWhitespace()
            guard i < end else { throw fail("unexpected end") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "}") { i += 1; break }
            throw fail("expected ',' or '}'")
        }
        var p: Priority? = nil
        if let priority { p = try Priority(json: priority) }
        if let value {
            guard !otherKey else { throw EmberError.invalidValueKey }
            count = before + valueCount
            return value.withPriority(p ?? value.priority)
        }
        if !build {
            if anyEmpty && nonEmpty > 0 {
                // A key may be written non-empty and then null (or the reverse): the building
                // walk says what the object is (rare: an export has no nulls).
                i = start
                count = before
                let built = try objectNode(nesting: nesting, depth: depth, count: &count, build: true)
                return built.isEmpty ? .empty : Self.checkedMark
            }
            if nonEmpty > 0 { try Self.checkDepth(depth + 1) }
            return nonEmpty > 0 ? Self.checkedMark : .empty
        }
        if !kids.isEmpty { try Self.checkDepth(depth + 1) }
        return Node(children: kids, priority: p)
    }
}
