import EmberTestSupport
import Testing
@testable import EmberCore

/// `Node.validate(json:depth:)` (the import's check of a part, no node built) accepts and
/// refuses exactly what `Node(json:depth:)` does, with the same error, and knows when the node
/// would be empty.
@Suite(.printsSeedOnFailure) struct NodeValidateTests {
    /// Valid and invalid JSON alike: bad keys, `.value` beside other members, `.sv`, bad and good
    /// priorities, non-finite numbers, long strings, empty containers (no data), deep nesting.
    static func randomJSON(_ g: inout SplitMix64, depth: Int) -> JSON {
        switch Int.random(in: 0..<(depth > 40 ? 6 : 10), using: &g) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &g))
        case 2: return .int(Int64.random(in: -9...9, using: &g))
        case 3: return .double([1.5, -0.0, .infinity, .nan, 1e300].randomElement(using: &g)!)
        case 4: return .string(Int.random(in: 0..<400, using: &g) == 0 ? String(repeating: "s", count: Limits.maxStringBytes + 1) : "s")
        case 5: return .string("")
        case 6: return .array((0..<Int.random(in: 0...3, using: &g)).map { _ in randomJSON(&g, depth: depth + 1) })
        default:
            var o: KeyMap<JSON> = [:]
            for _ in 0..<Int.random(in: 0...3, using: &g) {
                let key = ["a", "b", "0", "x.y", "$k", "", ".value", ".sv", "ok"].randomElement(using: &g)!
                o[key] = randomJSON(&g, depth: depth + 1)
            }
            if Int.random(in: 0..<4, using: &g) == 0 {
                o[".priority"] = [.int(1), .string("p"), .bool(true), .null, .object([:])].randomElement(using: &g)!
            }
            return .object(o)
        }
    }

    @Test func validateAgreesWithBuildingTheNode() {
        var g = TestSeed.generator(0x7A11_D0DE)
        var refused = 0, empty = 0
        for round in 0..<5_000 {
            let json = Self.randomJSON(&g, depth: 0)
            let depth = Int.random(in: 0...(Limits.maxPathDepth), using: &g)
            let built: Result<Node, EmberError> = Result { () throws(EmberError) in try Node(json: json, depth: depth) }
            let checked: Result<Bool, EmberError> = Result { () throws(EmberError) in try Node.validate(json: json, depth: depth) }
            switch (built, checked) {
            case (.success(let node), .success(let isEmpty)):
                #expect(node.isEmpty == isEmpty, "round \(round): \(json)")
                if isEmpty { empty += 1 }
            case (.failure(let a), .failure(let b)):
                #expect(a == b, "round \(round): \(json)")
                refused += 1
            default:
                Issue.record("round \(round) at depth \(depth): built \(built), validated \(checked): \(json)")
            }
        }
        // Both outcomes and empty nodes were exercised.
        #expect(refused > 250 && empty > 250 && refused < 4_750)
    }
}
