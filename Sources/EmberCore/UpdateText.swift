/// A multi-path update's parts as their checked JSON text (issue 42): each part a relative path
/// and the span of its value's text in one buffer (a PATCH body, or the log entry that carries
/// them), shared rather than copied. The log entry's encoding copies the spans, its size is a
/// sum, and a replica builds the nodes from the text (`Node(jsonText:)`) with no JSON tree.
/// Only writes without server values take this form: their nodes need nothing from the data.
public struct UpdateText: Sendable, Equatable {
    /// The buffer the texts lie in.
    public let bytes: [UInt8]
    /// In path order, none at or below another (as `WriteValidation.updateParts` orders them).
    public let parts: [(path: Path, range: Range<Int>)]

    /// The parts' nodes as the checking scan built them from this very text, when the node that
    /// scanned it keeps them for its own apply (`carrying`): a cluster leader applying its own
    /// bulk PATCH then does not build them again from the text (issue 42). In memory only: never
    /// encoded, not part of equality; every other replica builds them from the text.
    public private(set) var nodes: [Node]?
    /// The absolute path depth of the update's base `nodes` were built at.
    private var nodesBase = 0
    /// The nodes the scan counted for all parts (`WriteValidation.countNodes`' count), 0 when
    /// the text did not come from a scan: what weighs carried nodes (`carriedBytes`).
    public private(set) var nodeCount = 0

    /// A part's text lies inside the PATCH body's object: its nesting counts one container more
    /// (`Node(jsonText:jsonDepth:)`), on every replica alike.
    public static let nesting = 1

    public init(bytes: [UInt8], parts: [(path: Path, range: Range<Int>)]) {
        precondition(parts.allSatisfy { $0.range.lowerBound >= 0 && $0.range.upperBound <= bytes.count }, "a part outside its buffer")
        self.bytes = bytes
        self.parts = parts
    }

    public var count: Int { parts.count }

    public func text(_ i: Int) -> ArraySlice<UInt8> { bytes[parts[i].range] }

    /// Part `i`'s node, at absolute path depth `depth`: the carried one when it was built at
    /// that depth (the same function over the same text: the same node and the same checks),
    /// else built from the text.
    public func node(_ i: Int, depth: Int) throws(EmberError) -> Node {
        if let nodes, depth == nodesBase + parts[i].path.count { return nodes[i] }
        return try Node(jsonText: bytes, range: parts[i].range, depth: depth, jsonDepth: Self.nesting)
    }

    /// This text carrying `nodes`, the scan's nodes of its parts for an update at `base` (path
    /// depth): what `scan` returned with it, in part order.
    public func carrying(_ nodes: [Node], base: Int) -> UpdateText {
        precondition(nodes.count == parts.count, "one node per part")
        var t = self
        t.nodes = nodes
        t.nodesBase = base
        return t
    }

    /// This text without carried nodes (what a replica decodes).
    public var withoutNodes: UpdateText {
        var t = self
        t.nodes = nil
        return t
    }

    /// Estimated heap bytes per carried node beyond its text: the node (~56 bytes) and its key
    /// in its parent's hash table at up to 3/4 load, that table's header, malloc's overhead.
    /// From the layout, not measured: session 17's leader held ~6x a bulk import's text in nodes.
    public static let carriedBytesPerNode = 160

    /// Estimated heap bytes the carried nodes hold (0 without): per counted node, plus the
    /// parts' text (strings are copies of it). What a cache of entries weighs them at.
    public var carriedBytes: Int {
        guard nodes != nil else { return 0 }
        return nodeCount * Self.carriedBytesPerNode + parts.reduce(0) { $0 + $1.range.count }
    }

    /// The parts as JSON values (for a reader that wants the tree form: the rules' dry run, a
    /// member too old to read the text form).
    public func json() throws(EmberError) -> [(Path, JSON)] {
        var out: [(Path, JSON)] = []
        out.reserveCapacity(parts.count)
        for (path, range) in parts {
            var p = JSONParser(bytes: bytes, range: range, maxDepth: Limits.maxJSONDepth - Self.nesting)
            out.append((path, try p.parseDocument()))
        }
        return out
    }

    public static func == (a: UpdateText, b: UpdateText) -> Bool {
        a.parts.count == b.parts.count && zip(a.parts, b.parts).allSatisfy { x, y in
            x.path == y.path && a.bytes[x.range].elementsEqual(b.bytes[y.range])
        }
    }

    /// The checking scan of a PATCH body at `base`: each member's path, the span of its value
    /// and the value's node (built as it is checked), in path order. nil whenever the body is
    /// anything but a clean update the front and the store would take as it stands (not an
    /// object, no member, a bad or repeated path, nested paths, too many parts, a part over
    /// `maxNodes` by the front's count, a server value, a refused value, malformed text): the
    /// caller then takes the tree path, which answers exactly as before.
    public static func scan(body: [UInt8], base: Path, maxParts: Int, maxNodes: Int) -> (text: UpdateText, nodes: [Node])? {
        var p = JSONParser(bytes: body, maxDepth: Limits.maxJSONDepth)
        var found: [(path: Path, key: [UInt8], range: Range<Int>, node: Node)] = []
        var nodeCount = 0
        do throws(EmberError) {
            p.skipWhitespace()
            guard p.i < p.end, body[p.i] == UInt8(ascii: "{") else { return nil }
            p.i += 1
            while true {
                p.skipWhitespace()
                guard p.i < p.end, body[p.i] == UInt8(ascii: "\"") else { return nil }
                let key = try p.parseString()
                p.skipWhitespace()
                guard p.i < p.end, body[p.i] == UInt8(ascii: ":") else { return nil }
                p.i += 1
                p.skipWhitespace()
                guard let rel = try? Path(key), !rel.isRoot, base.count + rel.count <= Limits.maxPathDepth,
                      found.count < maxParts else { return nil }
                let start = p.i
                var count = 0
                let node = try p.node(nesting: nesting, depth: base.count + rel.count, count: &count)
                guard count <= maxNodes else { return nil }
                nodeCount += count
                found.append((rel, rel.sortKey, start..<p.i, node))
                p.skipWhitespace()
                guard p.i < p.end else { return nil }
                if body[p.i] == UInt8(ascii: ",") { p.i += 1; continue }
                guard body[p.i] == UInt8(ascii: "}") else { return nil }
                p.i += 1
                break
            }
            p.skipWhitespace()
            guard p.i == p.end else { return nil }
        } catch {
            return nil
        }
        found.sort { $0.key.lexicographicallyPrecedes($1.key) }
        // A repeated path (the parse keeps the last) or one above another: the tree path says.
        for i in found.indices.dropFirst() where found[i - 1].path.contains(found[i].path) { return nil }
        var text = UpdateText(bytes: body, parts: found.map { ($0.path, $0.range) })
        text.nodeCount = nodeCount
        return (text, found.map(\.node))
    }
}
