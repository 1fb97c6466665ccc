import EmberCore
import Testing
@testable import EmberRules

/// A data source that counts the stored entries it hands out: one per point question
/// (`exists`, `hasChildren`, `shallow`), and one per node of a materialised subtree.
private final class CountingSource: RulesDataSource {
    let inner: NodeDataSource
    var entries = 0

    init(_ root: Node) { inner = NodeDataSource(root) }

    func node(at path: Path) -> Node {
        let n = inner.node(at: path)
        entries += max(1, n.nodeCount)
        return n
    }
    func shallow(at path: Path) -> (leaf: Leaf?, priority: Priority?) { entries += 1; return inner.shallow(at: path) }
    func exists(at path: Path) -> Bool { entries += 1; return inner.exists(at: path) }
    func hasChildren(at path: Path) -> Bool { entries += 1; return inner.hasChildren(at: path) }
}

private func bigTree(_ n: Int = 10_000) -> Node {
    var kids: KeyMap<Node> = [:]
    for i in 0..<n { kids["k\(i)"] = Node(.int(Int64(i))) }
    return Node(children: ["big": Node(children: kids, priority: .number(7)), "rooms": Node(children: ["r1": Node(.bool(true))])])
}

private func p(_ s: String) -> Path { try! Path(s) }

@Test func existsOnALargeSubtreeReadsConstantEntries() throws {
    let engine = try RulesEngine(text: """
    {"rules": {"w": {".write": "root.child('big').exists() && root.child('big').hasChildren() && root.child('big').getPriority() === 7 && !root.child('big').isString()"},
               "r": {".read": "data.parent().child('big').hasChild('k9999') && data.parent().child('big').hasChildren(['k1', 'k2'])"}}}
    """)
    let src = CountingSource(bigTree())
    #expect(engine.canWrite(path: p("w/x"), newValue: Node(.int(1)), auth: nil, data: src, now: 0))
    #expect(src.entries <= 4, "read \(src.entries) entries")
    src.entries = 0
    #expect(engine.canRead(path: p("r"), auth: nil, data: src, now: 0))
    #expect(src.entries <= 3, "read \(src.entries) entries")
}

@Test func valOfALargeSubtreeStillMaterialisesIt() throws {
    // The counter is real: `val()` has to read every entry (as Firebase does).
    let engine = try RulesEngine(text: #"{"rules": {"w": {".write": "root.child('big').val() != null"}}}"#)
    let src = CountingSource(bigTree())
    #expect(engine.canWrite(path: p("w"), newValue: Node(.int(1)), auth: nil, data: src, now: 0))
    #expect(src.entries > 10_000)
}

@Test func newDataOverlayReadsOnlyTheWriteAndWhatRulesName() throws {
    let engine = try RulesEngine(text: """
    {"rules": {"msgs": {"$m": {".write": "root.child('rooms').child(newData.child('room').val()).exists()",
                                ".validate": "newData.hasChildren(['room', 'text']) && newData.parent().exists() && newData.parent().parent().child('big').exists()"}}}}
    """)
    let src = CountingSource(bigTree())
    let msg = try Node(json: JSON.parse(#"{"room": "r1", "text": "hi"}"#))
    #expect(engine.canWrite(path: p("msgs/m1"), newValue: msg, auth: nil, data: src, now: 0))
    #expect(src.entries <= 8, "read \(src.entries) entries")
    let bad = try Node(json: JSON.parse(#"{"room": "nope", "text": "hi"}"#))
    #expect(!engine.canWrite(path: p("msgs/m1"), newValue: bad, auth: nil, data: src, now: 0))
    // A multi-path update: newData of each part sees the other parts.
    src.entries = 0
    let parts: [(Path, Node)] = [(p("m2/room"), Node(.string("r1"))), (p("m2/text"), Node(.string("x")))]
    #expect(engine.canUpdate(path: p("msgs"), parts: parts, auth: nil, data: src, now: 0))
    #expect(!engine.canUpdate(path: p("msgs"), parts: [parts[0]], auth: nil, data: src, now: 0))
    #expect(src.entries <= 40, "read \(src.entries) entries")
}

@Test func overlayAnswersLikeTheMaterialisedTree() throws {
    let base = try Node(json: JSON.parse(#"{"a": {"b": 1, "c": {"d": "x"}}, "e": true}"#)).setting(Node(.int(5), priority: .string("p")), at: p("f"))
    let writes: [[(Path, Node)]] = [
        [(p("a/b"), .empty), (p("a/c/d"), .empty)],      // deletions empty a
        [(p("e/z"), Node(.int(1)))],                      // writing under a leaf
        [(p("f/g"), Node(.int(2)))],                      // leaf with priority becomes an object
        [(p("a/c"), .empty)], [(p("x/y/z"), Node(.string("n")))], [(p(""), .empty)],
    ]
    let paths = ["", "a", "a/b", "a/c", "a/c/d", "e", "e/z", "f", "f/g", "x", "x/y", "q"].map(p)
    for w in writes {
        let overlay = OverlayDataSource(base: NodeDataSource(base), writes: w)
        let full = base.updating(w)
        for path in paths {
            let n = full.child(at: path)
            #expect(overlay.node(at: path) == n, "\(w) \(path)")
            #expect(overlay.exists(at: path) == !n.isEmpty, "\(w) \(path)")
            #expect(overlay.hasChildren(at: path) == n.hasChildren, "\(w) \(path)")
            #expect(overlay.shallow(at: path).leaf == n.leaf && overlay.shallow(at: path).priority == n.priority, "\(w) \(path)")
        }
    }
}
