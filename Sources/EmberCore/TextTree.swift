/// A text update's part values read into flat arrays (issue 42): what `Node(jsonText:)` builds,
/// without a `Node` per value, a `KeyMap` per object and a `String` per key and string. A store
/// writes its records from it straight (every object's children already in key order, as their
/// encoded segments); a follower's import spent a quarter of its samples building the nodes and
/// freeing them.
///
/// `read` takes what the direct walk of `Node(jsonText:)` takes and throws on anything else
/// (the caller then builds the node, which takes the value or throws that walk's error), and
/// on anything it does not take as it stands: a key repeated in one object (the last one wins
/// there, a null one deletes).
public struct TextTree {
    /// One non-empty value: a leaf, or an object with at least one non-empty child.
    public struct Item {
        public enum Kind: UInt8 { case object, bool, int, double, string }
        public var kind: Kind
        /// bool: 0 or 1; int: its bits; double: its bits.
        public var bits: UInt64 = 0
        /// string: its UTF-8's span in `strings`; object: its children's span in `children`.
        public var start: Int32 = 0
        public var count: Int32 = 0
        /// Its key's segment (`KeyOrder.appendSortKey`) in `segments`, as its object's child.
        public var segmentStart: Int32 = 0
        public var segmentCount: Int32 = 0
        /// Its priority's index in `priorities`, or -1.
        public var priority: Int32 = -1
    }

    public private(set) var items: [Item] = []
    /// The objects' children as item indices, each object's in key order.
    public private(set) var children: [Int32] = []
    public private(set) var segments: [UInt8] = []
    public private(set) var strings: [UInt8] = []
    public private(set) var priorities: [Priority] = []
    /// Children met but not yet placed (their objects are still open): (segment, item or -1).
    private var open: [(segmentStart: Int32, segmentCount: Int32, item: Int32)] = []

    public init() {}

    /// Forgets every item, keeping the arrays' room (one tree reads every part of an update).
    public mutating func removeAll() {
        items.removeAll(keepingCapacity: true)
        children.removeAll(keepingCapacity: true)
        segments.removeAll(keepingCapacity: true)
        strings.removeAll(keepingCapacity: true)
        priorities.removeAll(keepingCapacity: true)
        open.removeAll(keepingCapacity: true)
    }

    /// Reads `bytes[range]` as a value at path depth `depth` inside `jsonDepth` containers (as
    /// `Node(jsonText:range:depth:jsonDepth:)`): its item's index, or nil when it is empty.
    public mutating func read(_ bytes: [UInt8], range: Range<Int>, depth: Int, jsonDepth: Int) throws(EmberError) -> Int32? {
        var p = JSONParser(bytes: bytes, range: range, maxDepth: Limits.maxJSONDepth - jsonDepth)
        let opened = open.count
        do throws(EmberError) {
            p.skipWhitespace()
            let item = try value(&p, nesting: 0, depth: depth)
            p.skipWhitespace()
            guard p.i == p.end else { throw p.fail("trailing characters") }
            return item < 0 ? nil : item
        } catch {
            // The objects it left open: the items made stay, unreferenced.
            open.removeSubrange(opened...)
            throw error
        }
    }

    public func string(_ item: Item) -> ArraySlice<UInt8> { strings[Int(item.start)..<Int(item.start + item.count)] }
    public func segment(_ item: Item) -> ArraySlice<UInt8> {
        segments[Int(item.segmentStart)..<Int(item.segmentStart + item.segmentCount)]
    }
    public func children(_ item: Item) -> ArraySlice<Int32> { children[Int(item.start)..<Int(item.start + item.count)] }
    public func priority(_ item: Item) -> Priority? { item.priority < 0 ? nil : priorities[Int(item.priority)] }

    private mutating func add(_ item: Item) -> Int32 {
        items.append(item)
        return Int32(items.count - 1)
    }

    /// As `JSONParser.node`: the item, or -1 for an empty value.
    private mutating func value(_ p: inout JSONParser, nesting: Int, depth: Int) throws(EmberError) -> Int32 {
        guard p.i < p.end else { throw p.fail("unexpected end") }
        switch p.bytes[p.i] {
        case UInt8(ascii: "{"): return try object(&p, nesting: nesting + 1, depth: depth)
        case UInt8(ascii: "["): return try array(&p, nesting: nesting + 1, depth: depth)
        case UInt8(ascii: "n"): try p.expect("null"); return -1
        case UInt8(ascii: "\""):
            let start = strings.count
            try Self.readString(&p, into: &strings)
            let n = strings.count - start
            guard n <= Limits.maxStringBytes else { throw .stringTooLong(bytes: n) }
            return add(Item(kind: .string, start: Int32(start), count: Int32(n)))
        case UInt8(ascii: "t"): try p.expect("true"); return add(Item(kind: .bool, bits: 1))
        case UInt8(ascii: "f"): try p.expect("false"); return add(Item(kind: .bool, bits: 0))
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            switch try p.parseNumber() {
            case .int(let v): return add(Item(kind: .int, bits: UInt64(bitPattern: v)))
            case .double(let d): return add(Item(kind: .double, bits: d.bitPattern))
            default: throw p.fail("bad number")
            }
        default: throw p.fail("unexpected character")
        }
    }

    /// A string's UTF-8 appended to `out`: an unescaped one copied as it lies (checked as
    /// `parseString` checks it), an escaped one through `parseString`.
    private static func readString(_ p: inout JSONParser, into out: inout [UInt8]) throws(EmberError) {
        let open = p.i
        let start = p.i + 1
        var j = start
        var ascii = true
        while j < p.end {
            let c = p.bytes[j]
            if c == UInt8(ascii: "\"") { break }
            if c == UInt8(ascii: "\\") {
                p.i = open
                out.append(contentsOf: try p.parseString().utf8)
                return
            }
            if c < 0x20 { p.i = j; throw p.fail("control character in string") }
            if c >= 0x80 { ascii = false }
            j += 1
        }
        guard j < p.end else { p.i = j; throw p.fail("unterminated string") }
        if !ascii {
            let valid = p.bytes.withUnsafeBufferPointer { UTF8Check.isValid(UnsafeBufferPointer(rebasing: $0[start..<j])) }
            guard valid else { p.i = j + 1; throw p.fail("invalid UTF-8") }
        }
        out.append(contentsOf: p.bytes[start..<j])
        p.i = j + 1
    }

    private mutating func array(_ p: inout JSONParser, nesting: Int, depth: Int) throws(EmberError) -> Int32 {
        guard nesting <= p.maxDepth else { throw p.fail("nesting too deep") }
        p.i += 1
        p.skipWhitespace()
        if p.i < p.end && p.bytes[p.i] == UInt8(ascii: "]") { p.i += 1; return -1 }
        // `Node.convert`: a non-empty array's items lie one level down, null or not.
        if depth + 1 > Limits.maxPathDepth { throw .pathTooDeep(depth: depth + 1) }
        let first = open.count
        var index = 0
        while true {
            p.skipWhitespace()
            let child = try value(&p, nesting: nesting, depth: depth + 1)
            if child >= 0 {
                // Items come in index order, which is their keys' order.
                let s = segments.count
                KeyOrder.appendSortKey(String(index), to: &segments)
                open.append((Int32(s), Int32(segments.count - s), child))
            }
            index += 1
            p.skipWhitespace()
            guard p.i < p.end else { throw p.fail("unexpected end") }
            if p.bytes[p.i] == UInt8(ascii: ",") { p.i += 1; continue }
            if p.bytes[p.i] == UInt8(ascii: "]") { p.i += 1; break }
            throw p.fail("expected ',' or ']'")
        }
        return close(from: first, priority: -1)
    }

    private mutating func object(_ p: inout JSONParser, nesting: Int, depth: Int) throws(EmberError) -> Int32 {
        guard nesting <= p.maxDepth else { throw p.fail("nesting too deep") }
        p.i += 1
        p.skipWhitespace()
        if p.i < p.end && p.bytes[p.i] == UInt8(ascii: "}") { p.i += 1; return -1 }
        let first = open.count
        // `.priority` and `.value` (the last of each); whether any other key was met.
        var priority: JSON? = nil
        var value: Int32? = nil
        var otherKey = false
        while true {
            p.skipWhitespace()
            guard p.i < p.end, p.bytes[p.i] == UInt8(ascii: "\"") else { throw p.fail("expected key") }
            let s = segments.count
            let dotted = p.i + 1 < p.end && p.bytes[p.i + 1] == UInt8(ascii: ".")
            var key = ""
            if dotted { key = try p.parseString() } else { try readKey(&p) }
            let segmentCount = Int32(segments.count - s)
            p.skipWhitespace()
            guard p.i < p.end, p.bytes[p.i] == UInt8(ascii: ":") else { throw p.fail("expected ':'") }
            p.i += 1
            p.skipWhitespace()
            if dotted {
                switch key {
                case ".priority": priority = try p.parseValue(depth: nesting)
                // `.value`'s node lies at this object's own depth.
                case ".value": value = try self.value(&p, nesting: nesting, depth: depth)
                default: throw EmberError.invalidValueKey  // `.sv` or a refused key: the node's walk says which
                }
            } else {
                otherKey = true
                let child = try self.value(&p, nesting: nesting, depth: depth + 1)
                // Empty ones too: a repeated key is found among them all.
                open.append((Int32(s), segmentCount, child))
            }
            p.skipWhitespace()
            guard p.i < p.end else { throw p.fail("unexpected end") }
            if p.bytes[p.i] == UInt8(ascii: ",") { p.i += 1; continue }
            if p.bytes[p.i] == UInt8(ascii: "}") { p.i += 1; break }
            throw p.fail("expected ',' or '}'")
        }
        var pr: Priority? = nil
        if let priority { pr = try Priority(json: priority) }
        if let value {
            guard !otherKey else { throw EmberError.invalidValueKey }
            // `value.withPriority(p ?? value.priority)`.
            if value >= 0, let pr { items[Int(value)].priority = addPriority(pr) }
            return value
        }
        try sortOpen(from: first)
        // Empty children leave; with none left the object is empty (and loses its priority).
        var kept = first
        for k in first..<open.count where open[k].item >= 0 {
            open[kept] = open[k]
            kept += 1
        }
        open.removeSubrange(kept...)
        if open.count > first && depth + 1 > Limits.maxPathDepth { throw .pathTooDeep(depth: depth + 1) }
        var priorityIndex: Int32 = -1
        if let pr, open.count > first { priorityIndex = addPriority(pr) }
        return close(from: first, priority: priorityIndex)
    }

    private mutating func addPriority(_ p: Priority) -> Int32 {
        priorities.append(p)
        return Int32(priorities.count - 1)
    }

    /// A member's key (not starting with "."), checked as `Key.validate` checks it, as its
    /// segment appended to `segments`.
    private mutating func readKey(_ p: inout JSONParser) throws(EmberError) {
        let start = p.i + 1
        var j = start
        while j < p.end, p.bytes[j] != UInt8(ascii: "\""), p.bytes[j] != UInt8(ascii: "\\"), p.bytes[j] < 0x80, !Key.isForbidden(p.bytes[j]) { j += 1 }
        if j < p.end, p.bytes[j] == UInt8(ascii: "\""), j > start, j - start <= Limits.maxKeyBytes {
            // Plain ASCII: its bytes are the key.
            KeyOrder.appendSortKey(utf8: p.bytes[start..<j], to: &segments)
            p.i = j + 1
            return
        }
        let key = try p.parseString()
        try Key.validate(key)
        KeyOrder.appendSortKey(key, to: &segments)
    }

    /// Sorts the open children from `first` by their segments; a repeated key throws.
    private mutating func sortOpen(from first: Int) throws(EmberError) {
        let n = open.count - first
        if n < 2 { return }
        var repeated = false
        segments.withUnsafeBufferPointer { b in
            // Byte order, a prefix first (no memcmp here: this module imports nothing).
            func compare(_ x: (segmentStart: Int32, segmentCount: Int32, item: Int32),
                         _ y: (segmentStart: Int32, segmentCount: Int32, item: Int32)) -> Int {
                let xs = Int(x.segmentStart), ys = Int(y.segmentStart)
                for k in 0..<Int(min(x.segmentCount, y.segmentCount)) where b[xs + k] != b[ys + k] {
                    return b[xs + k] < b[ys + k] ? -1 : 1
                }
                return Int(x.segmentCount) - Int(y.segmentCount)
            }
            open[first...].sort { compare($0, $1) < 0 }
            for k in (first + 1)..<open.count where compare(open[k - 1], open[k]) == 0 { repeated = true }
        }
        if repeated { throw .invalidData("a key repeated in an object") }
    }

    /// The object of the open children from `first` (already in key order, none empty), or -1
    /// when there is none; they leave `open`.
    private mutating func close(from first: Int, priority: Int32) -> Int32 {
        if open.count == first { return -1 }
        let start = children.count
        for c in open[first...] {
            items[Int(c.item)].segmentStart = c.segmentStart
            items[Int(c.item)].segmentCount = c.segmentCount
            children.append(c.item)
        }
        let n = open.count - first
        open.removeSubrange(first...)
        return add(Item(kind: .object, start: Int32(start), count: Int32(n), priority: priority))
    }
}
