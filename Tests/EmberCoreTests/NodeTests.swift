import Testing
@testable import EmberCore

@Suite("Node")
struct NodeTests {
    func build(_ text: String, depth: Int = 0) -> EmberError? {
        errorOf { try Node(json: JSON.parse(text), depth: depth) }
    }

    // MARK: null and empty

    @Test("null, empty objects and objects of nulls are all the empty node")
    func emptiness() {
        for text in ["null", "{}", "[]", #"{"a":null}"#, #"{"a":{}}"#, #"{"a":{"b":{"c":null}},"d":[]}"#,
                     "[null,null]", #"{".priority":1}"#, #"{"a":{".priority":2}}"#, #"{".value":null,".priority":3}"#] {
            let n = node(text)
            #expect(n.isEmpty, "\(text)")
            #expect(n == .empty, "\(text)")
            #expect(n.priority == nil, "\(text)")
            #expect(n.toJSON() == .null)
            #expect(n.exportJSON() == .null)
            #expect(n.firebaseHash == "")
        }
        #expect(Node.empty.nodeCount == 0)
        #expect(Node().isEmpty && !Node().isLeaf && !Node().hasChildren)
        #expect(Node.empty.withPriority(.number(1)).priority == nil)
        #expect(Node(children: ["a": .empty], priority: .string("p")) == .empty)
    }

    @Test("empty children are dropped, the rest kept")
    func emptyChildrenDropped() {
        let n = node(#"{"a":1,"b":null,"c":{},"d":{"e":null,"f":2}}"#)
        #expect(n.sortedKeys == ["a", "d"])
        #expect(n.child("d").sortedKeys == ["f"])
        #expect(n.toJSON() == json(#"{"a":1,"d":{"f":2}}"#))
        #expect(n.nodeCount == 4)
    }

    @Test("leaves")
    func leaves() {
        #expect(node("true").leaf == .bool(true))
        #expect(node("-3").leaf == .int(-3))
        #expect(node("2.5").leaf == .double(2.5))
        #expect(node(#""s""#).leaf == .string("s"))
        #expect(node("1") == node("1.0"))
        #expect(Leaf.int(1) == Leaf.double(1.0))
        #expect(Leaf.int(1).hashValue == Leaf.double(1.0).hashValue)
        #expect(Leaf.bool(true) != Leaf.int(1))
        #expect(Leaf.string("1") != Leaf.int(1))
        // Canonically equivalent but different strings are different values (they hash differently).
        #expect(Leaf.string("\u{E9}") != Leaf.string("e\u{301}"))
        #expect(node(#""\u00e9""#) != node(#""e\u0301""#))
        #expect(node(#""\u00e9""#).firebaseHash != node(#""e\u0301""#).firebaseHash)
        #expect(node("9223372036854775807").toJSON().serialized() == "9223372036854775807")
        #expect(node("1").isLeaf && !node("1").hasChildren && node("1").childCount == 0)
        #expect(node("1").child("a").isEmpty)
        #expect(node("1").nodeCount == 1)
    }

    @Test("non-finite doubles are rejected")
    func nonFinite() {
        #expect(errorOf { try Node(json: .double(.infinity)) } != nil)
        #expect(errorOf { try Node(json: .double(.nan)) } != nil)
        #expect(errorOf { try Node(json: .object(["a": .double(-.infinity)])) } != nil)
    }

    // MARK: arrays

    @Test("arrays are stored as objects with integer keys")
    func arraysStored() {
        let n = node("[1,null,3]")
        #expect(n.sortedKeys == ["0", "2"])
        #expect(n.child("0").leaf == .int(1))
        #expect(n.child("2").leaf == .int(3))
        #expect(n == node(#"{"0":1,"2":3}"#))
        #expect(n.exportJSON() == json(#"{"0":1,"2":3}"#))
    }

    @Test("array heuristic: all keys canonical integers and maxKey < 2 × count", arguments: [
        (#"[1,null,3]"#, #"[1,null,3]"#),
        (#"{"0":1,"2":3}"#, #"[1,null,3]"#),
        (#"{"0":1,"5":3}"#, #"{"0":1,"5":3}"#),
        (#"{"1":"a"}"#, #"[null,"a"]"#),
        (#"{"2":"a"}"#, #"{"2":"a"}"#),
        (#"{"0":"a"}"#, #"["a"]"#),
        (#"{"0":1,"1":2,"2":3,"3":4}"#, "[1,2,3,4]"),
        (#"{"0":1,"1":2,"5":3}"#, "[1,2,null,null,null,3]"),
        (#"{"0":1,"1":2,"6":3}"#, #"{"0":1,"1":2,"6":3}"#),
        (#"{"01":1,"1":2}"#, #"{"01":1,"1":2}"#),
        (#"{"0":1,"01":2}"#, #"{"0":1,"01":2}"#),
        (#"{"-1":1,"0":2}"#, #"{"-1":1,"0":2}"#),
        (#"{"0":1,"a":2}"#, #"{"0":1,"a":2}"#),
        (#"{"0":1," 1":2}"#, #"{"0":1," 1":2}"#),
        (#"{"0":1,"1e0":2}"#, #"{"0":1,"1e0":2}"#),
        (#"[[1,2],{"0":"x"}]"#, #"[[1,2],["x"]]"#),
        (#"[{"a":1},null,{"0":"x","3":"y"}]"#, #"[{"a":1},null,["x",null,null,"y"]]"#),
        (#"[{"a":1},null,{"0":"x","4":"y"}]"#, #"[{"a":1},null,{"0":"x","4":"y"}]"#),
        (#"{"0":1,"1":null,"2":{}}"#, "[1]"),
    ])
    func arrayHeuristic(_ input: String, _ expected: String) {
        let out = node(input).toJSON()
        #expect(out == json(expected))
        #expect(out.serialized() == json(expected).serialized())
    }

    @Test("very large integer keys are never arrays")
    func largeIndices() {
        #expect(node(#"{"0":1,"1":2,"2147483647":3}"#).toJSON() == json(#"{"0":1,"1":2,"2147483647":3}"#))
        #expect(node(#"{"99999999999":1}"#).toJSON() == json(#"{"99999999999":1}"#))
    }

    // MARK: priorities and .value

    @Test("priorities via .priority and .value at any depth")
    func priorities() {
        let n = node(#"{"a":{".value":"Tom",".priority":1.0},"b":{"c":{"d":true,".priority":"x"}},".priority":-5}"#)
        #expect(n.priority == .number(-5))
        #expect(n.child("a").leaf == .string("Tom"))
        #expect(n.child("a").priority == .number(1))
        #expect(n.child(at: path("b/c")).priority == .string("x"))
        #expect(n.child(at: path("b/c/d")).priority == nil)
        #expect(n.child("b").priority == nil)
        // Values without priorities.
        #expect(n.toJSON() == json(#"{"a":"Tom","b":{"c":{"d":true}}}"#))
        // .value alone is just the value.
        #expect(node(#"{".value":3}"#) == node("3"))
        #expect(node(#"{".value":3}"#).priority == nil)
        // Integer priorities are doubles.
        #expect(node(#"{".value":1,".priority":7}"#).priority == .number(7))
        #expect(node(#"{".value":1,".priority":null}"#).priority == nil)
        // .value holding an object is accepted; the outer priority wins.
        let o = node(#"{".value":{"x":1,".priority":"in"},".priority":"out"}"#)
        #expect(o.child("x").leaf == .int(1))
        #expect(o.priority == .string("out"))
        #expect(node(#"{".value":{"x":1,".priority":"in"}}"#).priority == .string("in"))
    }

    @Test("invalid priorities are rejected")
    func invalidPriorities() {
        for text in [#"{".value":1,".priority":true}"#, #"{"a":1,".priority":{"x":1}}"#, #"{"a":1,".priority":[1]}"#] {
            guard case .invalidPriority? = build(text) else {
                Issue.record("\(text) should be an invalid priority")
                continue
            }
        }
    }

    @Test(".value mixed with other children is rejected")
    func valueWithChildren() {
        #expect(build(#"{".value":1,"a":2}"#) == .invalidValueKey)
        #expect(build(#"{"x":{"y":{".value":1,"a":2}}}"#) == .invalidValueKey)
        #expect(build(#"{".value":1,".priority":2}"#) == nil)
    }

    @Test("unresolved server values are rejected")
    func unresolvedServerValue() {
        guard case .unrecognizedServerValue? = build(#"{"a":{".sv":"timestamp"}}"#) else {
            Issue.record("expected unrecognizedServerValue")
            return
        }
    }

    @Test("keys in data are validated")
    func keysValidated() {
        #expect(build(#"{"a.b":1}"#) != nil)
        #expect(build(#"{"x":{"a/b":1}}"#) != nil)
        #expect(build(#"{"":1}"#) != nil)
        #expect(build(#"{"$x":1}"#) != nil)
        #expect(build(#"{"a\u0001":1}"#) != nil)
        #expect(build("{\"" + String(repeating: "k", count: 769) + "\":1}") == .keyTooLong(bytes: 769))
        #expect(build("{\"" + String(repeating: "k", count: 768) + "\":1}") == nil)
    }

    @Test("data depth: 32 levels below the root allowed, 33 not; depth counts from the write location")
    func dataDepth() {
        func nested(_ levels: Int) -> String {
            String(repeating: "{\"k\":", count: levels) + "1" + String(repeating: "}", count: levels)
        }
        #expect(build(nested(32)) == nil)
        #expect(build(nested(33)) == .pathTooDeep(depth: 33))
        #expect(build(nested(30), depth: 2) == nil)
        #expect(build(nested(31), depth: 2) == .pathTooDeep(depth: 33))
        #expect(build("1", depth: 32) == nil)
        #expect(build(#"{"a":1}"#, depth: 32) == .pathTooDeep(depth: 33))
        #expect(build("[1]", depth: 32) == .pathTooDeep(depth: 33))
    }

    @Test("strings up to 10 MB")
    func stringLimit() {
        let max = Limits.maxStringBytes
        #expect(max == 10 * 1024 * 1024)
        #expect(errorOf { try Node(json: .string(String(repeating: "a", count: max))) } == nil)
        #expect(errorOf { try Node(json: .string(String(repeating: "a", count: max + 1))) } == .stringTooLong(bytes: max + 1))
        // Bytes, not characters: half as many 2-byte characters plus one.
        let multi = String(repeating: "é", count: max / 2) + "a"
        #expect(errorOf { try Node(json: .object(["k": .string(multi)])) } == .stringTooLong(bytes: max + 1))
    }

    // MARK: export

    @Test("export format keeps priorities and never makes arrays")
    func export() throws {
        let n = node(#"{"a":{".value":"Tom",".priority":1},"b":[1,2],"c":{"d":1,".priority":"p"},".priority":2.5}"#)
        let expected = json(#"{"a":{".value":"Tom",".priority":1},"b":{"0":1,"1":2},"c":{"d":1,".priority":"p"},".priority":2.5}"#)
        #expect(n.exportJSON() == expected)
        // Export output re-imports to the same node.
        #expect(try Node(json: n.exportJSON()) == n)
        #expect(node("5").exportJSON() == .int(5))
        #expect(n.toJSON() == json(#"{"a":"Tom","b":[1,2],"c":{"d":1}}"#))
    }

    // MARK: set / update

    @Test("setting creates parents and prunes parents left empty")
    func settingAndPruning() {
        var root = Node.empty
        root = root.setting(node("1"), at: path("a/b/c"))
        #expect(root.toJSON() == json(#"{"a":{"b":{"c":1}}}"#))
        root = root.setting(node("2"), at: path("a/x"))
        #expect(root.toJSON() == json(#"{"a":{"b":{"c":1},"x":2}}"#))
        root = root.setting(.empty, at: path("a/b/c"))
        #expect(root.toJSON() == json(#"{"a":{"x":2}}"#))
        root = root.setting(.empty, at: path("a/x"))
        #expect(root == .empty)
        // Deleting something absent changes nothing.
        let one = node(#"{"a":1}"#)
        #expect(one.setting(.empty, at: path("b/c")) == one)
        // Setting at the root replaces everything.
        #expect(one.setting(node("7"), at: .root) == node("7"))
        // Setting an empty object is a delete.
        #expect(one.setting(node("{}"), at: path("a")) == .empty)
        // The mutating form agrees.
        var m = one
        m.set(node("2"), at: path("b"))
        #expect(m == node(#"{"a":1,"b":2}"#))
    }

    @Test("deleting the last child drops the parent's priority")
    func pruningDropsPriority() {
        let n = node(#"{"a":{"b":1,".priority":5},"c":2}"#)
        let after = n.setting(.empty, at: path("a/b"))
        #expect(after.child("a") == .empty)
        #expect(after == node(#"{"c":2}"#))
        // Re-adding a child later gives a node without the old priority.
        #expect(after.setting(node("3"), at: path("a/b")).child("a").priority == nil)
    }

    @Test("writing under a leaf turns it into an object that keeps the leaf's priority (tests 83–85)")
    func leafBecomesObject() {
        let leaf = node(#"{"x":{".value":"v",".priority":"p"}}"#)
        let after = leaf.setting(node("1"), at: path("x/y"))
        #expect(after.child("x").leaf == nil)
        #expect(after.child("x").priority == .string("p"))
        #expect(after.child("x").toJSON() == json(#"{"y":1}"#))
        #expect(after.exportJSON() == json(#"{"x":{"y":1,".priority":"p"}}"#))
        // Deep write under a leaf.
        let deep = node("5").setting(node("1"), at: path("a/b"))
        #expect(deep == node(#"{"a":{"b":1}}"#))
    }

    @Test("deleting under a leaf leaves the leaf alone")
    func deleteUnderLeaf() {
        let leaf = node(#"{"x":{".value":"v",".priority":"p"}}"#)
        #expect(leaf.setting(.empty, at: path("x/y")) == leaf)
        #expect(leaf.setting(.empty, at: path("x/y/z")) == leaf)
        #expect(node("3").setting(.empty, at: path("a")) == node("3"))
        #expect(leaf.updating([(path("x/y"), .empty)]) == leaf)
    }

    @Test("replacing an object's child keeps the object's priority; replacing the node itself does not")
    func priorityOnReplace() {
        let n = node(#"{"o":{"a":1,".priority":9}}"#)
        #expect(n.setting(node("2"), at: path("o/a")).child("o").priority == .number(9))
        #expect(n.setting(node(#"{"a":2}"#), at: path("o")).child("o").priority == nil)
        #expect(n.setting(node(#"{"a":2,".priority":1}"#), at: path("o")).child("o").priority == .number(1))
    }

    @Test("multi-path updates apply together")
    func updates() {
        let n = node(#"{"a":{"b":1,"c":2},"d":3}"#)
        let u = n.updating([(path("a/b"), node("10")), (path("d"), .empty), (path("e/f"), node("\"x\""))])
        #expect(u.toJSON() == json(#"{"a":{"b":10,"c":2},"e":{"f":"x"}}"#))
        #expect(n.updating([]) == n)
        #expect(n.updating([(path("a/b"), .empty), (path("a/c"), .empty), (path("d"), .empty)]) == .empty)
    }

    @Test("withPriority and child(at:)")
    func misc() {
        let n = node(#"{"a":{"b":{"c":1}}}"#)
        #expect(n.child(at: path("a/b/c")).leaf == .int(1))
        #expect(n.child(at: path("a/x/c")).isEmpty)
        #expect(n.child(at: path("a/b/c/d")).isEmpty)
        #expect(n.child(at: .root) == n)
        #expect(n.withPriority(.string("p")).priority == .string("p"))
        #expect(n.withPriority(.string("p")).withPriority(nil).priority == nil)
        #expect(n.nodeCount == 4)
        #expect(n.childCount == 1)
        #expect(n.hasChildren && !n.isLeaf)
    }

    @Test("Priority(json:)")
    func priorityFromJSON() throws {
        #expect(try Priority(json: .null) == nil)
        #expect(try Priority(json: .int(3)) == .number(3))
        #expect(try Priority(json: .double(-1.5)) == .number(-1.5))
        #expect(try Priority(json: .string("s")) == .string("s"))
        #expect(errorOf { try Priority(json: .bool(true)) } != nil)
        #expect(errorOf { try Priority(json: .array([])) } != nil)
        #expect(Priority.number(2).json == .double(2))
        #expect(Priority.string("a").json == .string("a"))
    }
}
