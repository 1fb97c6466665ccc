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

    /// Part `i`'s node, at absolute path depth `depth`.
    public func node(_ i: Int, depth: Int) throws(EmberError) -> Node {
        try Node(jsonText: bytes, range: parts[i].range, depth: depth, jsonDepth: Self.nesting)
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
    /// caller then takes the tree path, which answers exactly as before. `buildNodes` false:
    /// the same checks with no node built (`nodes` nil), for a store that builds them from the
    /// text itself.
    public static func scan(body: [UInt8], base: Path, maxParts: Int, maxNodes: Int,
                            buildNodes: Bool = true) -> (text: UpdateText, nodes: [Node]?)? {
        var p = JSONParser(bytes: body, maxDepth: Limits.maxJSONDepth)
        var found: [(path: Path, key: [UInt8], range: Range<Int>, node: Node)] = []
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
                let node = try p.node(nesting: nesting, depth: base.count + rel.count, count: &count, build: buildNodes)
                guard count <= maxNodes else { return nil }
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
        return (UpdateText(bytes: body, parts: found.map { ($0.path, $0.range) }), buildNodes ? found.map(\.node) : nil)
    }
}
