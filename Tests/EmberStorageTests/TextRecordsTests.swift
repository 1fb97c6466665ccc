import EmberCore
import EmberTestSupport
import Foundation
import Testing
@testable import EmberStorage

/// A text update's parts over nothing are written straight from their text (issue 42,
/// `Applier.writeText`): exactly the state, answers and changes of the nodes built from it
/// (`StoreOptions.textRecords` false, the path before), and only where nothing needs the nodes.
@Suite(.printsSeedOnFailure) struct TextRecordsTests {
    /// Two stores, one of each way, fed the same log entries (as a cluster member applies them:
    /// no node handed over, each built or read from the text at apply).
    final class Pair {
        let a: EmberStore, b: EmberStore
        var index: UInt64 = 0

        init(_ adjust: (inout StoreOptions) -> Void = { _ in }) throws {
            var text = smallOptions(), nodes = smallOptions()
            adjust(&text)
            adjust(&nodes)
            nodes.textRecords = false
            (a, b) = (try openStore(tempDir(), text), try openStore(tempDir(), nodes))
        }

        func close() { a.close(); b.close() }

        func apply(_ op: WriteOperation, auth: WriteAuth = .admin) async throws -> (WriteResult, WriteResult) {
            index += 1
            let e = LogEntry(index: index, term: 1, namespace: "t", operation: op, timestamp: 1_000 + Int64(index), auth: auth)
            let ra = try await a.apply(entries: [e]), rb = try await b.apply(entries: [e])
            return (ra[0], rb[0])
        }
    }

    /// Each body through both stores: the same answers (built from the text or not), the same
    /// state and rows. `fromText`: whether the text way must have been taken (nil: either).
    @discardableResult
    func applyBoth(_ s: Pair, _ bodies: [String], base: String = "/users", auth: WriteAuth = .admin,
                   fromText: Bool? = true) async throws -> [(WriteResult, WriteResult)] {
        var out: [(WriteResult, WriteResult)] = []
        for (k, body) in bodies.enumerated() {
            guard let (text, _) = UpdateText.scan(body: Array(body.utf8), base: p(base), maxParts: 100_000, maxNodes: 1_000_000,
                                                  buildNodes: false) else {
                Issue.record("body \(k) was not taken whole by the scan: \(body.prefix(200))")
                continue
            }
            let (ra, rb) = try await s.apply(.updateText(path: p(base), parts: text), auth: auth)
            #expect(ra.isApplied, "body \(k): \(ra.outcome)")
            #expect(rb.textPatch == nil, "body \(k): the nodes' store built a value from text")
            if let fromText { #expect((ra.textPatch != nil) == fromText, "body \(k): written from its text: \(ra.textPatch != nil)") }
            // The answers built from the text are those of the nodes (`==` reads `value` and `changeSet`).
            #expect(ra == rb, "body \(k)")
            #expect(ra.value.isIdentical(to: rb.value), "body \(k)")
            #expect(try s.a.stateHash() == s.b.stateHash(), "body \(k)")
            out.append((ra, rb))
        }
        #expect(try s.a.get("/").isIdentical(to: try s.b.get("/")))
        for table in ["tree", "ver", "treex", "verx"] {
            #expect(try s.a.footprint().tables.first { $0.name == table }?.entries == s.b.footprint().tables.first { $0.name == table }?.entries,
                    "\(table) rows")
        }
        return out
    }

    /// Bulk and small updates: fresh users (every edge case of `OrderedRecordsTests.user`:
    /// priorities, `.value` wrappers, empty objects and null deletes, deep nesting, escaped and
    /// NFC keys, integer-like keys, non-canonical numbers, small objects stored inline), parts
    /// over data (the node path) mixed with parts over nothing, parts below a leaf and below an
    /// inline object, repeated keys.
    @Test func theStateAndAnswersAreThoseOfTheNodes() async throws {
        let s = try Pair()
        defer { s.close() }
        var g = TestSeed.generator(0x7E47_42)
        try await applyBoth(s, [OrderedRecordsTests.body(&g, 0..<300)])
        // Over data, partly: those parts build their nodes.
        try await applyBoth(s, [OrderedRecordsTests.body(&g, 100..<250, deletes: true)], fromText: nil)
        try await applyBoth(s, [OrderedRecordsTests.body(&g, 300..<500)])
        try await applyBoth(s, [OrderedRecordsTests.body(&g, 0..<20)], fromText: false)
        try await applyBoth(s, [OrderedRecordsTests.body(&g, 490..<600, deletes: true), OrderedRecordsTests.body(&g, 600..<610)])
        let bodies = [
            // Below a leaf (it becomes an object keeping its priority), below an inline object
            // (stored per leaf first), a new child beside others, nulls and empties only.
            #"{"u000001/name/first":"a","u000001/age/x":{"y":1},"u000003/tags/new":true,"u000004/posts/-N":{"t":"x"},"#
                + #""fresh/a":null,"fresh/b":{},"fresh/c":{"d":null,".priority":3}}"#,
            // A repeated key (the last one wins, a null one deletes): the node's walk decides.
            #"{"r1":{"k":1,"k":2},"r2":{"k":1,"k":null},"r3":{"k":null,"k":{"z":1}},"r4":{"a":1,"b":2}}"#,
            // Leaves with priorities as parts, `.value` over objects, arrays with nulls.
            #"{"l1":{".value":"s",".priority":"p"},"l2":{".priority":1.5,".value":{"a":1,".priority":2}},"l3":[null,1,[],{"x":null},"s"],"#
                + #""l4":-0.0,"l5":12345678901234567890,"l6":{".value":null,".priority":1},"l7":"\u00e9\n\"","l8":{"2":1,"10":2,"-3":3,"a":4}}"#,
        ]
        _ = try await applyBoth(s, bodies)
        // The part at the root's child (`/users` itself) written whole, over data: the node path.
        _ = try await applyBoth(s, [#"{"users":{"only":1}}"#], base: "/", fromText: false)
    }

    /// Long keys (their records' keys in `tree`'s overflow twin; an inline object whose children's
    /// keys would not fit stays per leaf).
    @Test func longKeysAreWrittenAsTheNodesWriteThem() async throws {
        let s = try Pair()
        defer { s.close() }
        let long = String(repeating: "k", count: 700)
        let parts = (0..<70).map { i in #""p\#(i)":{"\#(long)\#(i)":{"a":1,"b":"\#(long)"},"s":{"x":\#(i)}}"# }
        _ = try await applyBoth(s, ["{" + parts.joined(separator: ",") + "}"])
    }

    /// What needs the nodes takes the node path: an index in the namespace, a trigger, rules
    /// that read the values. A rule granting every write does not.
    @Test func partsNeedingTheirNodesAreBuilt() async throws {
        let s = try Pair()
        defer { s.close() }
        var g = TestSeed.generator(0x7E47_43)
        _ = try await applyBoth(s, [OrderedRecordsTests.body(&g, 0..<70)])
        _ = try await s.apply(.setRules(text: #"{"rules":{".read":true,".write":true}}"#))
        _ = try await applyBoth(s, [OrderedRecordsTests.body(&g, 70..<140)], auth: .user(nil))
        _ = try await s.apply(.setRules(text: #"{"rules":{".read":true,".write":"newData.exists()"}}"#))
        _ = try await applyBoth(s, [OrderedRecordsTests.body(&g, 140..<210)], auth: .user(nil), fromText: false)
        _ = try await applyBoth(s, [OrderedRecordsTests.body(&g, 210..<280)], fromText: true)
        _ = try await s.apply(.setRules(text: #"{"rules":{".read":true,".write":true,"users":{".indexOn":["age"]}}}"#))
        _ = try await applyBoth(s, [OrderedRecordsTests.body(&g, 280..<350)], fromText: false)
        _ = try await s.apply(.setRules(text: #"{"rules":{".read":true,".write":true}}"#))
        _ = try await s.apply(.triggers(.define(text: TriggerApplyTests.defs)))
        _ = try await applyBoth(s, [OrderedRecordsTests.body(&g, 350..<420)], fromText: false)
        _ = try await applyBoth(s, [#"{"messages/m1":{"a":1},"messages/m2":"x"}"#], base: "/", fromText: false)
        #expect(try TriggerApplyTests().outbox(s.a, "msgs").count == 2)
        #expect(try TriggerApplyTests().outbox(s.b, "msgs").count == 2)
    }

    /// The walk into flat arrays takes what `Node(jsonText:)` takes and builds the same value;
    /// what it refuses, the node's walk decides.
    @Test func theTreeIsTheNodes() throws {
        let texts = [
            #"{"b":1,"a":{"c":[1,null,{"d":"e"}],".priority":"p"},"10":true,"9":false,"-1":2.5}"#,
            #"{".value":{"x":1},".priority":4}"#, #"{"a":null}"#, #"[]"#, #"{}"#, #""s\u00e9\\""#, #"1e400"#,
            #"{"a":1,"a":2}"#, #"{".sv":"timestamp"}"#, #"{"a.b":1}"#, #"{"x":1,".value":2}"#, #"[1,2"#,
        ]
        var tree = TextTree()
        for text in texts {
            let bytes = Array(text.utf8)
            let node = try? Node(jsonText: bytes, depth: 1)
            guard let root = try? tree.read(bytes, range: 0..<bytes.count, depth: 1, jsonDepth: 0) else {
                continue  // refused: the caller builds the node
            }
            #expect(node != nil, "the tree took what the node refuses: \(text)")
            #expect(Self.node(tree, root).isIdentical(to: node ?? .empty), "\(text)")
        }
    }

    /// Random values (repeated and refused keys, `.priority` and `.value` anywhere, nulls and
    /// empties, arrays, escapes, canonically equivalent keys, deep nesting near the limits): the
    /// tree takes only what the node takes, and stands for the same node.
    @Test func randomValuesReadAsTheirNodes() throws {
        var g = TestSeed.generator(0x7E47_44)
        let keys = ["a", "b", "0", "1", "10", "-1", "007", "2147483648", #"\u00e9"#, #"e\u0301"#, #"k\"q"#, #"\ud83d\ude00"#,
                    #"\ue000"#, "é", "e\u{301}", ".priority", ".value", ".sv", "a.b", "", String(repeating: "L", count: 20)]
        let leaves = ["null", "true", "false", "0", "-0", "1.0", "1e3", "-12", "9007199254740993", "1.5e-7", #""s""#, #""\n\u00e9""#,
                      #""""#, "{}", "[]", #""\#(String(repeating: "x", count: 40))""#]
        func value(_ depth: Int) -> String {
            let r = Int.random(in: 0..<10, using: &g)
            if depth <= 0 || r < 4 { return leaves.randomElement(using: &g)! }
            if r < 6 {
                return "[" + (0..<Int.random(in: 0...4, using: &g)).map { _ in value(depth - 1) }.joined(separator: ",") + "]"
            }
            return "{" + (0..<Int.random(in: 0...5, using: &g)).map { _ in
                let k = keys.randomElement(using: &g)!
                let v = k == ".priority" ? [#""p""#, "3", "null", "{}"].randomElement(using: &g)! : value(depth - 1)
                return #""\#(k)":\#(v)"#
            }.joined(separator: ",") + "}"
        }
        var tree = TextTree()
        var taken = 0
        for k in 0..<3_000 {
            // Now and then a chain past the depth limits around a random value.
            let deep = k % 10 == 0 ? Int.random(in: 20...40, using: &g) : 0
            let text = String(repeating: #"{"d":"#, count: deep) + value(Int.random(in: 0...8, using: &g)) + String(repeating: "}", count: deep)
            let bytes = Array(text.utf8)
            let depth = Int.random(in: 0...8, using: &g)
            let node = try? Node(jsonText: bytes, range: 0..<bytes.count, depth: depth, jsonDepth: 1)
            if k % 100 == 0 { tree.removeAll() }
            guard let root = try? tree.read(bytes, range: 0..<bytes.count, depth: depth, jsonDepth: 1) else { continue }
            taken += 1
            guard let node else {
                Issue.record("the tree took what the node refuses: \(text)")
                continue
            }
            #expect(Self.node(tree, root).isIdentical(to: node), "\(text)")
        }
        #expect(taken > 1_000, "the tree took \(taken) of 3,000")
    }

    /// The node an item stands for (keys read back from their segments).
    static func node(_ tree: TextTree, _ root: Int32?) -> Node {
        guard let root else { return .empty }
        let item = tree.items[Int(root)]
        let p = tree.priority(item)
        switch item.kind {
        case .bool: return Node(.bool(item.bits == 1), priority: p)
        case .int: return Node(.int(Int64(bitPattern: item.bits)), priority: p)
        case .double: return Node(.double(Double(bitPattern: item.bits)), priority: p)
        case .string: return Node(.string(String(decoding: tree.string(item), as: UTF8.self)), priority: p)
        case .object:
            var kids = KeyMap<Node>()
            for c in tree.children(item) {
                var key: [UInt8] = []
                TextRecords.appendKey(tree.segment(tree.items[Int(c)]), to: &key)
                kids[String(decoding: key, as: UTF8.self)] = node(tree, c)
            }
            return Node(children: kids, priority: p)
        }
    }
}
