import Testing
@testable import EmberCore

@Suite("Server values")
struct ServerValuesTests {
    let now: Int64 = 1_700_000_000_123

    func resolve(_ text: String, existing: Node = .empty) throws -> JSON {
        try ServerValues.resolve(json(text), existing: existing, now: now)
    }

    func increment(_ existing: String?, by delta: String) throws -> JSON {
        try resolve(#"{".sv":{"increment":\#(delta)}}"#, existing: existing.map(node) ?? .empty)
    }

    @Test("timestamp")
    func timestamp() throws {
        #expect(try resolve(#"{".sv":"timestamp"}"#) == .int(now))
        guard case .int = try resolve(#"{".sv":"timestamp"}"#) else {
            Issue.record("timestamp must be an integer")
            return
        }
        #expect(try resolve(#"{"a":{".sv":"timestamp"},"b":1}"#) == .object(["a": .int(now), "b": .int(1)]))
    }

    @Test("increment: int + int stays an exact int")
    func intPlusInt() throws {
        #expect(try increment("5", by: "3") == .int(8))
        #expect(try increment("-5", by: "3") == .int(-2))
        guard case .int(let big) = try increment("9223372036854775806", by: "1") else {
            Issue.record("Int64.max - 1 + 1 should stay an int")
            return
        }
        #expect(big == Int64.max)
        guard case .int(let small) = try increment("-9223372036854775807", by: "-1") else {
            Issue.record("Int64.min + 1 - 1 should stay an int")
            return
        }
        #expect(small == Int64.min)
    }

    @Test("increment: integer overflow is computed as a double, in both directions")
    func overflow() throws {
        guard case .double(let up) = try increment("9223372036854775807", by: "1") else {
            Issue.record("positive overflow should give a double")
            return
        }
        #expect(up == 9223372036854775808.0)
        guard case .double(let down) = try increment("-9223372036854775808", by: "-1") else {
            Issue.record("negative overflow should give a double")
            return
        }
        #expect(down == -9223372036854775809.0)
        guard case .double(let both) = try increment("9223372036854775807", by: "9223372036854775807") else {
            Issue.record("overflow should give a double")
            return
        }
        #expect(both == 2 * 9223372036854775807.0)
    }

    @Test("increment: int and double mix to a double")
    func mixed() throws {
        guard case .double(let a) = try increment("1", by: "0.5") else {
            Issue.record("int + double should be a double")
            return
        }
        #expect(a == 1.5)
        guard case .double(let b) = try increment("1.5", by: "2") else {
            Issue.record("double + int should be a double")
            return
        }
        #expect(b == 3.5)
        #expect(try increment("0.25", by: "0.5") == .double(0.75))
        guard case .double(let c) = try increment("1", by: "1.0") else {
            Issue.record("1 + 1.0 is a double")
            return
        }
        #expect(c == 2)
    }

    @Test("increment: missing or non-numeric existing value gives the delta", arguments: [
        nil, #""text""#, "true", "false", #"{"a":1}"#, "[1,2]",
    ])
    func nonNumericExisting(_ existing: String?) throws {
        #expect(try increment(existing, by: "7") == .int(7))
        #expect(try increment(existing, by: "-2.5") == .double(-2.5))
    }

    @Test("increment with a non-numeric delta is an error")
    func badDelta() {
        for delta in [#""1""#, "true", "null", "{}", "[1]"] {
            guard case .unrecognizedServerValue? = errorOf({ try increment("1", by: delta) }) else {
                Issue.record("delta \(delta) should be rejected")
                continue
            }
        }
    }

    @Test("unknown server values are errors")
    func unknown() {
        for text in [#"{".sv":"now"}"#, #"{".sv":"TIMESTAMP"}"#, #"{".sv":1}"#, #"{".sv":null}"#,
                     #"{".sv":{"decrement":1}}"#, #"{".sv":{"increment":1,"extra":2}}"#, #"{".sv":{}}"#,
                     #"{"a":[1,{".sv":"bogus"}]}"#] {
            guard case .unrecognizedServerValue? = errorOf({ try resolve(text) }) else {
                Issue.record("\(text) should be rejected")
                continue
            }
        }
        #expect(EmberError.unrecognizedServerValue("x").description.contains("unrecognized server value"))
    }

    @Test("placeholders nested in objects and arrays resolve against the existing data at their own path")
    func nested() throws {
        let existing = node(#"{"a":{"count":10},"list":[1,2,3],"s":"x"}"#)
        let out = try resolve(#"""
            {"a":{"count":{".sv":{"increment":5}},"when":{".sv":"timestamp"}},
             "list":[{".sv":{"increment":1}},2,{".sv":{"increment":1}},{".sv":{"increment":1}}],
             "s":{".sv":{"increment":1}},"new":{"deep":{".sv":{"increment":2.5}}}}
            """#, existing: existing)
        #expect(out == json(#"""
            {"a":{"count":15,"when":\#(now)},"list":[2,2,4,1],"s":1,"new":{"deep":2.5}}
            """#))
        // The resolved document builds a node (no placeholders left).
        #expect(try Node(json: out).child(at: path("a/count")).leaf == .int(15))
    }

    @Test("placeholders in .priority and .value")
    func priorityAndValue() throws {
        let out = try resolve(#"{"a":{".value":"v",".priority":{".sv":"timestamp"}},".priority":{".sv":"timestamp"}}"#)
        #expect(out == json(#"{"a":{".value":"v",".priority":\#(now)},".priority":\#(now)}"#))
        let n = try Node(json: out)
        #expect(n.priority == .number(Double(now)))
        #expect(n.child("a").priority == .number(Double(now)))
        // `.value` refers to the node itself.
        let v = try resolve(#"{".value":{".sv":{"increment":1}},".priority":1}"#, existing: node("41"))
        #expect(v == json(#"{".value":42,".priority":1}"#))
        // Increment as a priority starts from nothing.
        #expect(try resolve(#"{"x":1,".priority":{".sv":{"increment":3}}}"#, existing: node(#"{"x":1}"#))
                == json(#"{"x":1,".priority":3}"#))
    }

    @Test("documents without placeholders are unchanged")
    func unchanged() throws {
        let text = #"{"a":[1,{"b":"c"}],"d":null,"e":2.5}"#
        #expect(try resolve(text, existing: node(#"{"a":5}"#)) == json(text))
        #expect(!ServerValues.containsPlaceholder(json(text)))
        #expect(ServerValues.containsPlaceholder(json(#"{"a":[1,{"b":{".sv":"timestamp"}}]}"#)))
        #expect(ServerValues.containsPlaceholder(json(#"{".sv":"timestamp"}"#)))
        #expect(ServerValues.containsPlaceholder(json(#"[{".sv":"x"}]"#)))
    }
}
