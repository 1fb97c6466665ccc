import EmberCore
import EmberSyncTree
import Testing

/// The previous sibling of child events comes from the view's sorted index (a binary search);
/// these check it against a full sort of the event cache through many adds, moves and removes.
@Suite("previous sibling from the sorted index")
struct SortedChildrenTests {
    /// Deterministic pseudo-random sequence (no global randomness in tests).
    struct LCG {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Int((state >> 33) % UInt64(bound))
        }
    }

    /// Expected previous sibling of `key` by `index` in `node`, from a full sort.
    func expectedPrev(_ node: Node, _ key: String, _ index: QueryIndex) -> String? {
        let sorted = QuerySpec(index: index).sortedChildren(of: node).map(\.key)
        guard let i = sorted.firstIndex(of: key), i > 0 else { return nil }
        return sorted[i - 1]
    }

    @Test("child_added, child_moved and child_changed carry the right prevName", arguments: [
        QueryIndex.key, .value, .child(Path(validated: ["n"])), .priority,
    ])
    func prevNamesMatchAFullSort(index: QueryIndex) throws {
        let tree = SyncTree(listenProvider: FakeListenProvider())
        let q = SyncQuery(path: Path(validated: ["items"]), spec: QuerySpec(index: index))
        _ = tree.addEventRegistration(q, RegistrationID(1))
        var current = Node.empty
        _ = tree.applyServerOverwrite(Path(validated: ["items"]), .empty)
        var rng = LCG(state: 42)
        var checked = 0
        for step in 0..<300 {
            let key = "k\(rng.next(150))"
            let value: Node
            switch rng.next(4) {
            case 0: value = .empty
            case 1: value = Node(.int(Int64(rng.next(20))))
            case 2: value = try Node(json: .object(["n": .int(Int64(rng.next(20))), ".priority": .int(Int64(rng.next(5)))]))
            default: value = Node(.string("s\(rng.next(20))"))
            }
            let path = Path(validated: ["items", key])
            let events = step % 50 == 49
                ? tree.applyServerMerge(Path(validated: ["items"]), [(Path(validated: [key]), value)])
                : tree.applyServerOverwrite(path, value)
            current = current.setting(value, at: Path(validated: [key]))
            for e in events where e.type == .childAdded || e.type == .childMoved || e.type == .childChanged {
                #expect(e.prevName == expectedPrev(current, e.childKey!, index), "step \(step) \(e.type) \(key)")
                checked += 1
            }
        }
        #expect(checked > 150)
        // A new registration replays every child with its previous sibling.
        let replay = tree.addEventRegistration(q, RegistrationID(2)).filter { $0.type == .childAdded }
        #expect(replay.count == current.children.count)
        for e in replay { #expect(e.prevName == expectedPrev(current, e.childKey!, index)) }
    }
}
