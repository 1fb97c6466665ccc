import EmberCore
import EmberTestSupport
import Testing

@testable import EmberProtocol

/// `WriteValidation.countNodes` (the front's nodes-per-write limit) counts an object's members
/// in the look that finds a key starting with "." and looks up `.sv` and `.value` only in
/// objects with one; it counts as the rule says in every case, on every budget.
@Suite(.printsSeedOnFailure) struct WriteValidationCountTests {
    /// The rule, written plainly: nulls make no node, a leaf or a server value one, an array one
    /// plus its elements', `.value` stands for its object, `.priority` is not a node.
    static func reference(_ json: JSON) -> Int {
        switch json {
        case .null: return 0
        case .bool, .int, .double, .string: return 1
        case .array(let a): return 1 + a.map(reference).reduce(0, +)
        case .object(let o):
            if o[".sv"] != nil { return 1 }
            if let v = o[".value"] { return reference(v) }
            return 1 + o.filter { $0.key != ".priority" }.map { reference($0.value) }.reduce(0, +)
        }
    }

    static func random(_ g: inout SplitMix64, depth: Int) -> JSON {
        switch Int.random(in: 0..<12, using: &g) {
        case 0: return .null
        case 1: return .int(1)
        case 2: return .string("s")
        case 3: return .object([".sv": .string("timestamp")])
        case 4: return .object([".value": random(&g, depth: depth + 1), ".priority": .int(2)])
        case 5 where depth < 4: return .array((0..<Int.random(in: 0...3, using: &g)).map { _ in random(&g, depth: depth + 1) })
        case 6...11 where depth < 4:
            var o: KeyMap<JSON> = [:]
            for _ in 0..<Int.random(in: 0...4, using: &g) {
                let key = ["a", "b.c", "x", ".priority", "é", "-1"].randomElement(using: &g)!
                o[key] = key == ".priority" ? .int(1) : random(&g, depth: depth + 1)
            }
            return .object(o)
        default: return .bool(true)
        }
    }

    @Test func countsAsTheRuleSays() {
        var g = TestSeed.generator(TestSeed.value(0xC0_0E7))
        var dotted = 0
        for _ in 0..<3_000 {
            let json = Self.random(&g, depth: 0)
            if case .object(let o) = json, Node.hasDotKey(o) { dotted += 1 }
            let expected = Self.reference(json)
            var budget = 1_000
            #expect(WriteValidation.countNodes(json, budget: &budget))
            #expect(1_000 - budget == expected, "\(json)")
            // The exact budget is enough (members counted before a `.value` or `.sv` is met
            // may spend it: the object is then counted again by that key's rule).
            var exact = expected
            #expect(WriteValidation.countNodes(json, budget: &exact), "\(json)")
            // A budget one short runs out.
            if expected > 0 {
                var short = expected - 1
                #expect(!WriteValidation.countNodes(json, budget: &short), "\(json)")
            }
        }
        #expect(dotted > 100)
    }
}
