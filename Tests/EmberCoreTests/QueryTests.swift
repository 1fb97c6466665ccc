import Testing
@testable import EmberCore

/// One vector of derived_query_vectors.json.
struct QueryVector: Sendable, CustomTestStringConvertible {
    let number: Int
    let raw: JSON

    var testDescription: String { "#\(number) \(raw["source_test"]?.stringValue ?? "") step \(raw["source_step"].map { $0.serialized() } ?? "")" }

    static let all: [QueryVector] = DerivedQueryVectors.lines.enumerated().map { QueryVector(number: $0.offset, raw: json($0.element)) }
}

/// Maps the spec's `params` encoding onto the QuerySpec builders, in the SDK's order (index first).
func querySpec(fromSpecParams params: JSON) throws -> QuerySpec {
    guard let p = params.objectValue else { throw EmberError.invalidQuery("params must be an object") }
    var q = QuerySpec()
    if case .string(let s)? = p["orderBy"] { q.index = .child(try Path(s)) }
    if case .bool(true)? = p["orderByKey"] { q.index = .key }
    if case .bool(true)? = p["orderByPriority"] { q.index = .priority }
    if case .bool(true)? = p["orderByValue"] { q.index = .value }
    func bound(_ name: String) throws -> (IndexValue, String?)? {
        guard let b = p[name] else { return nil }
        guard let value = IndexValue(json: b["index"] ?? .null) else { throw EmberError.invalidQuery("bad bound") }
        return (value, b["name"]?.stringValue)
    }
    if let (v, k) = try bound("startAt") { q = q.starting(at: v, key: k) }
    if let (v, k) = try bound("startAfter") { q = q.starting(after: v, key: k) }
    if let (v, k) = try bound("endAt") { q = q.ending(at: v, key: k) }
    if let (v, k) = try bound("endBefore") { q = q.ending(before: v, key: k) }
    if let (v, k) = try bound("equalTo") { q = q.equal(to: v, key: k) }
    if case .int(let n)? = p["limitToFirst"] { q = q.limited(toFirst: Int(n)) }
    if case .int(let n)? = p["limitToLast"] { q = q.limited(toLast: Int(n)) }
    return q
}

@Suite("Query windows")
struct QueryTests {
    @Test("there are 36 derived vectors")
    func vectorCount() {
        #expect(QueryVector.all.count == 36)
        #expect(QueryVector.all.filter { $0.raw["expected_order"] != nil }.count == 4)
    }

    @Test("derived query vectors", arguments: QueryVector.all)
    func derivedVector(_ v: QueryVector) throws {
        let spec = try querySpec(fromSpecParams: v.raw["params"]!)
        let data = try Node(json: v.raw["data"]!)
        let expected = try Node(json: v.raw["expected_result"]!)
        // Direct evaluation on the data.
        let result = spec.apply(to: data)
        #expect(result == expected, "got \(result.exportJSON().serialized())")
        // Evaluation at the vector's path inside a larger tree.
        let at = try Path(v.raw["path"]!.stringValue!)
        let tree = node(#"{"zzz":{"other":1},"a":{"x":2}}"#).setting(data, at: at)
        #expect(spec.apply(to: tree.child(at: at)) == expected)
        // The window agrees with the result and is in index order.
        let window = spec.window(of: data)
        #expect(Set(window.map(\.key)) == Set(expected.children.keys))
        for (a, b) in zip(window, window.dropFirst()) {
            #expect(spec.index.compare(a, b) < 0, "\(a.key) before \(b.key)")
        }
        if case .array(let order)? = v.raw["expected_order"] {
            #expect(window.map { JSON.string($0.key) } == order)
        }
        // The same spec sent over the wire evaluates the same.
        let wired = try QuerySpec(wire: json(spec.wireObject.serialized()))
        #expect(wired == spec)
        #expect(wired.apply(to: data) == expected)
    }

    // MARK: semantics beyond the vectors

    let scores = node(#"""
        {"a":{"s":1},"b":{"s":2},"c":{"s":2},"d":{"s":3},"e":{"s":"x"},"f":{"t":1},"g":{"s":true},"h":{"s":{"o":1}}}
        """#)

    func keys(_ q: QuerySpec, _ n: Node) -> [String] { q.window(of: n).map(\.key) }

    @Test("startAt/endAt with and without keys on a child index")
    func bounds() {
        let q = QuerySpec(index: .child(path("s")))
        #expect(keys(q, scores) == ["f", "g", "a", "b", "c", "d", "e", "h"])
        #expect(keys(q.starting(at: .number(2)), scores) == ["b", "c", "d", "e", "h"])
        #expect(keys(q.starting(at: .number(2), key: "c"), scores) == ["c", "d", "e", "h"])
        #expect(keys(q.ending(at: .number(2)), scores) == ["f", "g", "a", "b", "c"])
        #expect(keys(q.ending(at: .number(2), key: "b"), scores) == ["f", "g", "a", "b"])
        #expect(keys(q.equal(to: .number(2)), scores) == ["b", "c"])
        #expect(keys(q.equal(to: .number(2), key: "c"), scores) == ["c"])
        #expect(keys(q.equal(to: .null), scores) == ["f"])
        #expect(keys(q.equal(to: .bool(true)), scores) == ["g"])
        #expect(keys(q.equal(to: .string("x")), scores) == ["e"])
        #expect(keys(q.starting(at: .string("")), scores) == ["e", "h"])
        #expect(keys(q.starting(after: .number(2)), scores) == ["d", "e", "h"])
        #expect(keys(q.starting(after: .number(2), key: "b"), scores) == ["c", "d", "e", "h"])
        #expect(keys(q.ending(before: .number(2)), scores) == ["f", "g", "a"])
        #expect(keys(q.ending(before: .number(2), key: "c"), scores) == ["f", "g", "a", "b"])
        #expect(keys(q.starting(at: .number(5)).ending(at: .number(1)), scores) == [])
    }

    @Test("limits from either side, after the range")
    func limits() {
        let q = QuerySpec(index: .child(path("s")))
        #expect(keys(q.limited(toFirst: 3), scores) == ["f", "g", "a"])
        #expect(keys(q.limited(toLast: 3), scores) == ["d", "e", "h"])
        #expect(keys(q.starting(at: .number(2)).limited(toFirst: 2), scores) == ["b", "c"])
        #expect(keys(q.ending(at: .number(2)).limited(toLast: 2), scores) == ["b", "c"])
        #expect(keys(q.limited(toFirst: 100), scores).count == 8)
        #expect(keys(q.limited(toFirst: 0), scores) == [])
        #expect(q.limited(toFirst: 0).apply(to: scores) == .empty)
        // The later limit replaces the earlier.
        #expect(keys(q.limited(toFirst: 1).limited(toLast: 1), scores) == ["h"])
    }

    @Test("range wins over limit (test 62): a limit never pulls in children outside the range")
    func rangeWinsOverLimit() {
        let data = node(#"{"a":{"i":1},"b":{"i":2},"c":{"i":1000},"d":{"i":1001}}"#)
        let q = QuerySpec(index: .child(path("i"))).starting(at: .number(1)).ending(at: .number(10))
        #expect(keys(q.limited(toFirst: 3), data) == ["a", "b"])
        #expect(keys(q.limited(toLast: 3), data) == ["a", "b"])
        #expect(keys(q.limited(toLast: 1), data) == ["b"])
    }

    @Test("key index bounds use the key; startAfter/endBefore are exclusive")
    func keyIndex() {
        let data = node(#"{"a":1,"b":2,"c":3,"10":4,"9":5}"#)
        let q = QuerySpec(index: .key)
        #expect(keys(q, data) == ["9", "10", "a", "b", "c"])
        #expect(keys(q.starting(at: .string("b")), data) == ["b", "c"])
        #expect(keys(q.starting(after: .string("b")), data) == ["c"])
        #expect(keys(q.ending(at: .string("a")), data) == ["9", "10", "a"])
        #expect(keys(q.ending(before: .string("a")), data) == ["9", "10"])
        #expect(keys(q.equal(to: .string("10")), data) == ["10"])
        #expect(keys(q.starting(at: .string("9")).ending(at: .string("9")), data) == ["9"])
        #expect(keys(q.starting(after: .string("9")).limited(toFirst: 1), data) == ["10"])
        // Values under a key query are irrelevant.
        #expect(q.starting(after: .string("b")).start?.name == nil)
    }

    @Test("priority index ranges")
    func priorityIndex() {
        let data = node(#"""
            {"a":{".value":1,".priority":1},"b":{".value":1,".priority":2},"c":1,"d":{".value":1,".priority":"x"},"e":2}
            """#)
        let q = QuerySpec()
        #expect(keys(q, data) == ["c", "e", "a", "b", "d"])
        #expect(keys(q.starting(at: .number(2)), data) == ["b", "d"])
        #expect(keys(q.ending(at: .null), data) == ["c", "e"])
        #expect(keys(q.starting(at: .null, key: "d").ending(at: .null, key: "e"), data) == ["e"])
        #expect(keys(q.starting(at: .null).limited(toFirst: 3), data) == ["c", "e", "a"])
        #expect(keys(q.ending(at: .null, key: "d").limited(toLast: 1), data) == ["c"])
    }

    @Test("results: only the window, no root priority for filtered queries; leaves")
    func applyResults() {
        let data = node(#"{"a":{".value":1,".priority":1},"b":{"x":2},".priority":"root"}"#)
        let all = QuerySpec(index: .value)
        #expect(all.loadsAllData)
        #expect(all.apply(to: data) == data)
        #expect(all.apply(to: data).priority == .string("root"))
        let filtered = QuerySpec().limited(toLast: 1)  // "b" (no priority) sorts before "a" (priority 1)
        let r = filtered.apply(to: data)
        #expect(r.priority == nil)
        #expect(r.sortedKeys == ["a"])
        #expect(r.child("a").priority == .number(1))  // children keep their own priorities
        #expect(filtered.apply(to: node("5")) == .empty)
        #expect(QuerySpec().apply(to: node("5")) == node("5"))
        #expect(filtered.apply(to: .empty) == .empty)
        #expect(QuerySpec.default.isDefault)
        #expect(!QuerySpec(index: .key).isDefault)
        #expect(!filtered.loadsAllData)
        #expect(QuerySpec().starting(at: .null).hasRange)
        #expect(!QuerySpec().limited(toLast: 1).hasRange)
        #expect(QuerySpec().limited(toFirst: 1).apply(to: data) == node(#"{"b":{"x":2}}"#))
    }

    @Test("inRange")
    func inRange() {
        let q = QuerySpec(index: .value).starting(at: .number(1)).ending(before: .number(3))
        #expect(q.inRange(key: "a", node: node("1")))
        #expect(q.inRange(key: "a", node: node("2.9")))
        #expect(!q.inRange(key: "a", node: node("3")))
        #expect(!q.inRange(key: "a", node: node("0")))
        #expect(!q.inRange(key: "a", node: .empty))
    }

    // MARK: wire form (reference §6.4)

    @Test("wire q object: each field")
    func wireFields() throws {
        let q = QuerySpec(index: .child(path("a/b"))).starting(at: .number(1), key: "k").ending(at: .string("z"))
            .limited(toLast: 5)
        #expect(q.wireObject == json(#"{"sp":1,"sn":"k","sin":true,"ep":"z","ein":true,"l":5,"vf":"r","i":"a/b"}"#))
        #expect(QuerySpec().limited(toFirst: 2).wireObject == json(#"{"l":2,"vf":"l"}"#))
        #expect(QuerySpec().wireObject == json("{}"))
        #expect(QuerySpec(index: .key).wireObject == json(#"{"i":".key"}"#))
        #expect(QuerySpec(index: .value).wireObject == json(#"{"i":".value"}"#))
        #expect(QuerySpec().starting(at: .null).wireObject == json(#"{"sp":null,"sin":true}"#))
        #expect(QuerySpec().starting(at: .null).wireObject.serialized() == #"{"sin":true,"sp":null}"#)
        #expect(QuerySpec(index: .value).equal(to: .bool(false)).wireObject
                == json(#"{"sp":false,"sin":true,"ep":false,"ein":true,"i":".value"}"#))
    }

    @Test("startAfter/endBefore encodings (§6.4)")
    func exclusiveEncodings() {
        let child = QuerySpec(index: .child(path("i")))
        #expect(child.starting(after: .number(1)).wireObject
                == json(#"{"sp":1,"sn":"[MAX_NAME]","sin":false,"i":"i"}"#))
        #expect(child.ending(before: .number(10)).wireObject
                == json(#"{"ep":10,"en":"[MIN_NAME]","ein":false,"i":"i"}"#))
        #expect(child.starting(after: .number(1), key: "foo").wireObject
                == json(#"{"sp":1,"sn":"foo","sin":false,"i":"i"}"#))
        #expect(child.ending(before: .number(1), key: "foo").wireObject
                == json(#"{"ep":1,"en":"foo","ein":false,"i":"i"}"#))
        let key = QuerySpec(index: .key)
        #expect(key.starting(after: .string("a")).wireObject == json(#"{"sp":"a","sin":false,"i":".key"}"#))
        #expect(key.ending(before: .string("d")).wireObject == json(#"{"ep":"d","ein":false,"i":".key"}"#))
        let prio = QuerySpec()
        #expect(prio.starting(after: .null).wireObject == json(#"{"sp":null,"sn":"[MAX_NAME]","sin":false}"#))
    }

    @Test("wire q object round trips")
    func wireRoundTrip() throws {
        let specs: [QuerySpec] = [
            QuerySpec(),
            QuerySpec().limited(toFirst: 1),
            QuerySpec().limited(toLast: 7),
            QuerySpec(index: .key).starting(at: .string("a")).ending(before: .string("m")).limited(toLast: 3),
            QuerySpec(index: .value).equal(to: .number(-2.5)),
            QuerySpec(index: .value).equal(to: .bool(true)),
            QuerySpec(index: .child(path("x/y/z"))).starting(after: .string("s"), key: "k").ending(at: .null),
            QuerySpec(index: .child(path("x"))).starting(after: .number(1)).ending(before: .number(2)),
            QuerySpec().starting(at: .null, key: "d").ending(at: .null, key: "e").limited(toFirst: 2),
        ]
        for s in specs {
            let text = s.wireObject.serialized()
            let back = try QuerySpec(wire: JSON.parse(text))
            #expect(back == s, "\(text)")
            #expect(back.wireObject.serialized() == text)
            #expect(s.description == text)
        }
    }

    @Test("parsing wire q objects from clients")
    func wireParsing() throws {
        let q = try QuerySpec(wire: json(#"{"sp":1,"sin":true,"ep":5.5,"en":"z","l":10,"vf":"r","i":"a/b"}"#))
        #expect(q.index == .child(path("a/b")))
        #expect(q.start == QueryBound(value: .number(1), name: nil, inclusive: true))
        #expect(q.end == QueryBound(value: .number(5.5), name: "z", inclusive: true))
        #expect(q.limit == 10)
        #expect(q.limitFromStart == false)
        // Missing sin/ein means inclusive; explicit priority index is the default.
        let p = try QuerySpec(wire: json(#"{"sp":"a","i":".priority","l":1}"#))
        #expect(p.index == .priority)
        #expect(p.start?.inclusive == true)
        #expect(p.limitFromStart)
        #expect(try QuerySpec(wire: json("{}")) == QuerySpec())
        #expect(try QuerySpec(wire: json(#"{"i":".value"}"#)).index == .value)
        #expect(try QuerySpec(wire: json(#"{"i":".key"}"#)).index == .key)
    }

    @Test("malformed wire q objects are rejected")
    func wireErrors() {
        for text in ["[]", "1", #"{"i":1}"#, #"{"sp":{"a":1}}"#, #"{"ep":[1]}"#, #"{"sp":1,"sn":2}"#, #"{"l":-1}"#,
                     #"{"l":"5"}"#, #"{"l":1.5}"#, #"{"i":"a.b"}"#, #"{"l":99999999999}"#] {
            #expect(errorOf { try QuerySpec(wire: json(text)) } != nil, "\(text)")
        }
    }
}
