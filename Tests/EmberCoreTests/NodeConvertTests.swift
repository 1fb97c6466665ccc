import EmberTestSupport
import Testing
@testable import EmberCore

/// `Node(json:depth:)` builds an object without a key starting with "." from its members' map
/// (`mapValues`, no key hashed again): the same node as building the children's map member by
/// member, with null and empty members dropped, priorities and `.value` forms kept.
@Suite(.printsSeedOnFailure) struct NodeConvertTests {
    /// The node built member by member, as the conversion did before (valid JSON only).
    static func reference(_ json: JSON) -> Node {
        switch json {
        case .null: return .empty
        case .bool(let b): return Node(.bool(b))
        case .int(let i): return Node(.int(i))
        case .double(let d): return Node(.double(d))
        case .string(let s): return Node(.string(s))
        case .array(let items):
            var kids: KeyMap<Node> = [:]
            for (i, item) in items.enumerated() {
                let c = reference(item)
                if !c.isEmpty { kids[String(i)] = c }
            }
            return Node(children: kids)
        case .object(let o):
            let priority: Priority? = switch o[".priority"] {
            case .int(let i)?: .number(Double(i))
            case .string(let s)?: .string(s)
            default: nil
            }
            if let v = o[".value"] { let inner = reference(v); return inner.withPriority(priority ?? inner.priority) }
            var kids: KeyMap<Node> = [:]
            for (k, v) in o where k != ".priority" {
                let c = reference(v)
                if !c.isEmpty { kids[k] = c }
            }
            return Node(children: kids, priority: priority)
        }
    }

    static func random(_ g: inout SplitMix64, depth: Int) -> JSON {
        switch Int.random(in: 0..<(depth > 4 ? 6 : 10), using: &g) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &g))
        case 2: return .int(Int64.random(in: -99...99, using: &g))
        case 3: return .double(Double(Int.random(in: -99...99, using: &g)) / 8)
        case 4, 5: return .string(["", "s", "é", String(repeating: "x", count: 40)].randomElement(using: &g)!)
        case 6: return .array((0..<Int.random(in: 0...3, using: &g)).map { _ in random(&g, depth: depth + 1) })
        case 7: return .object([".value": random(&g, depth: depth + 1), ".priority": .int(Int64.random(in: 0...9, using: &g))])
        default:
            var o: KeyMap<JSON> = [:]
            for _ in 0..<Int.random(in: 0...6, using: &g) {
                o[["a", "b", "0", "12", "é", "e\u{301}", "-Nxyz", "k"].randomElement(using: &g)!] = random(&g, depth: depth + 1)
            }
            if Int.random(in: 0..<4, using: &g) == 0 { o[".priority"] = .string("p") }
            return .object(o)
        }
    }

    @Test func objectsBuildAsMemberByMember() throws {
        var g = TestSeed.generator(0x0B1E_C75)
        var dropped = 0, plain = 0
        for round in 0..<5_000 {
            let json = Self.random(&g, depth: 0)
            let node = try Node(json: json)
            let want = Self.reference(json)
            #expect(node.isIdentical(to: want), "round \(round): \(json)")
            // A node never holds an empty child.
            func noEmptyChild(_ n: Node) -> Bool { n.children.values.allSatisfy { !$0.isEmpty && noEmptyChild($0) } }
            #expect(noEmptyChild(node), "round \(round): \(json)")
            if case .object(let o) = json, !Node.hasDotKey(o) {
                plain += 1
                if o.values.contains(where: { Self.reference($0).isEmpty }) { dropped += 1 }
            }
        }
        #expect(plain > 500 && dropped > 100, "plain \(plain), with empty members \(dropped)")
    }

    /// A plain object's bad key or too deep child is refused as before.
    @Test func plainObjectsRefuseAsBefore() {
        #expect(throws: EmberError.self) { try Node(json: .object(["a.b": .int(1)])) }
        #expect(throws: EmberError.self) { try Node(json: .object(["ok": .object(["$x": .null])])) }
        #expect(throws: EmberError.pathTooDeep(depth: Limits.maxPathDepth + 1)) {
            try Node(json: .object(["a": .int(1)]), depth: Limits.maxPathDepth)
        }
        // Only null members: no child, so no depth to refuse, and no data.
        #expect((try? Node(json: .object(["a": .null]), depth: Limits.maxPathDepth))?.isEmpty == true)
    }
}
