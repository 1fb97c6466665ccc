import EmberTestSupport
import Testing
@testable import EmberCore

/// `Node.assembling` (a bulk update's patch, built level by level) gives what setting each part
/// on an empty node gives (`updating`), for parts in path order none of which nests in another:
/// empty parts (deletes) leave nothing, shared prefixes of any depth, integer-like keys.
@Suite(.printsSeedOnFailure) struct NodeAssemblingTests {
    @Test func assemblesAsSettingEachPart() {
        var g = TestSeed.generator(0xA55E_4B1E)
        let keys = ["a", "b", "users", "0", "7", "12", "-Nq", "é", "e\u{301}", "z"]
        var rounds = 0, withEmpty = 0
        while rounds < 2_000 {
            // Random paths, sorted, then any path at or below an earlier one dropped.
            var paths: [Path] = (0..<Int.random(in: 1...40, using: &g)).map { _ in
                Path(validated: (0..<Int.random(in: 1...4, using: &g)).map { _ in keys.randomElement(using: &g)! })
            }
            paths.sort()
            var kept: [Path] = []
            for p in paths where !(kept.last.map { $0.contains(p) } ?? false) { kept.append(p) }
            let parts: [(Path, Node)] = kept.map { p in
                switch Int.random(in: 0..<5, using: &g) {
                case 0: (p, .empty)
                case 1: (p, Node(children: ["x": Node(.int(1)), "y": Node(.string("s"))], priority: .number(2)))
                default: (p, Node(.int(Int64.random(in: 0...9, using: &g)), priority: Bool.random(using: &g) ? .string("p") : nil))
                }
            }
            if parts.contains(where: { $0.1.isEmpty }) { withEmpty += 1 }
            let assembled = Node.assembling(parts)
            let want = Node.empty.updating(parts)
            #expect(assembled.isIdentical(to: want), "round \(rounds): \(kept)")
            rounds += 1
        }
        #expect(withEmpty > 500)
        #expect(Node.assembling([]).isEmpty)
    }
}
