import EmberTestSupport
import Testing
@testable import EmberCore

/// `Node(jsonText:)` builds from text what `Node(json: JSON.parse(text))` builds, and refuses
/// what that refuses: every replica builds a bulk update's parts from their text in the log.
@Suite(.printsSeedOnFailure) struct NodeTextTests {
    /// Text for `json` with random whitespace, and sometimes a member written twice (the parse
    /// keeps the last: the first copy gets a different value).
    static func text(_ json: JSON, _ g: inout SplitMix64, into out: inout [UInt8]) {
        func space() { if Int.random(in: 0..<4, using: &g) == 0 { out += Array([" ", "\n ", "\t", "\r\n"].randomElement(using: &g)!.utf8) } }
        space()
        switch json {
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                text(item, &g, into: &out)
            }
            space()
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            var first = true
            for (k, v) in o {
                var copies: [JSON] = [v]
                if Int.random(in: 0..<8, using: &g) == 0 { copies.insert([.null, .int(5), .object(["z": .bool(true)])].randomElement(using: &g)!, at: 0) }
                for c in copies {
                    if !first { out.append(UInt8(ascii: ",")) }
                    first = false
                    space()
                    out += JSON.string(k).serializedBytes()
                    space()
                    out.append(UInt8(ascii: ":"))
                    text(c, &g, into: &out)
                }
            }
            space()
            out.append(UInt8(ascii: "}"))
        default:
            out += json.serializedBytes()
        }
        space()
    }

    /// Values the tree path refuses or treats apart, beside `NodeConvertTests.random`'s.
    static func value(_ g: inout SplitMix64, depth: Int) -> JSON {
        switch Int.random(in: 0..<14, using: &g) {
        case 0: return .object([".sv": .string("timestamp")])
        case 1: return .object(["a.b": .int(1)])
        case 2: return .object([".value": .int(1), "x": .null])
        case 3: return .object([".priority": .object([:]), "a": .int(1)])
        case 4: return .object(["a": .object([:]), "b": .array([])])
        case 5: return .double(1e300)
        case 6: return .int(Int64.max)
        case 7: return .string("e\u{301}\u{1F600}\"\\\n")
        default: return depth > 3 ? NodeConvertTests.random(&g, depth: depth) : .object(["k": value(&g, depth: depth + 1), "0": NodeConvertTests.random(&g, depth: depth + 1)])
        }
    }

    static func outcome(_ body: () throws(EmberError) -> Node) -> Result<Node, EmberError> {
        do throws(EmberError) { return .success(try body()) } catch { return .failure(error) }
    }

    /// The same node, or both refused. (Which error a value with several faults gets is not
    /// fixed even on the tree path: it checks an object's keys in its map's order.)
    static func same(_ a: Result<Node, EmberError>, _ b: Result<Node, EmberError>) -> Bool {
        switch (a, b) {
        case let (.success(x), .success(y)): return x.isIdentical(to: y)
        case (.failure, .failure): return true
        default: return false
        }
    }

    @Test func buildsWhatTheTreeBuilds() {
        var g = TestSeed.generator(0x7E47_0DE5)
        var walked = 0, valid = 0
        for round in 0..<6_000 {
            let json = Bool.random(using: &g) ? Self.value(&g, depth: 0) : NodeConvertTests.random(&g, depth: 0)
            var bytes: [UInt8] = []
            Self.text(json, &g, into: &bytes)
            let depth = Int.random(in: 0...3, using: &g) == 0 ? Limits.maxPathDepth - 1 : Int.random(in: 0...4, using: &g)
            let want = Self.outcome { () throws(EmberError) in try Node(json: JSON.parse(bytes), depth: depth) }
            let got = Self.outcome { () throws(EmberError) in try Node(jsonText: bytes, depth: depth) }
            #expect(Self.same(got, want), "round \(round): \(String(decoding: bytes, as: UTF8.self)) depth \(depth): \(got) vs \(want)")
            if case .success(let n) = want {
                valid += 1
                // The walk either hands over or builds the same node.
                if let w = Node.walked(bytes, range: 0..<bytes.count, depth: depth, jsonDepth: 0) {
                    walked += 1
                    #expect(w.isIdentical(to: n), "round \(round)")
                }
            } else {
                #expect(Node.walked(bytes, range: 0..<bytes.count, depth: depth, jsonDepth: 0) == nil, "round \(round): walked a refused value")
            }
        }
        // Only values with a server value hand a valid value over: most are walked.
        #expect(valid > 2_000 && walked * 10 > valid * 9, "valid \(valid), walked \(walked)")
    }

    /// A part's text read in place inside a larger buffer, nested as the body nests it.
    @Test func readsARangeInPlace() throws {
        let body = Array(#"{"a/b":{"x":[1,{"y":"z"}],".priority":2},"c":null}"#.utf8)
        let start = 7, end = body.count - #","c":null}"#.utf8.count
        let node = try Node(jsonText: body, range: start..<end, depth: 2, jsonDepth: 1)
        #expect(node.isIdentical(to: try Node(json: JSON.parse(body[start..<end]), depth: 2)))
        #expect(node.priority == .number(2))
        // Trailing text inside the range is refused as the parse refuses it.
        #expect(throws: EmberError.self) { try Node(jsonText: body, range: start..<(end + 2), depth: 2) }
    }

    /// Nesting counts from the body the part lies in: a part one level short of the limit alone
    /// is refused inside its body, as the body's parse refused it.
    @Test func nestingCountsTheBody() throws {
        let n = Limits.maxJSONDepth
        let deep = Array((String(repeating: "{\"a\":", count: n - 1) + "{}" + String(repeating: "}", count: n - 1)).utf8)
        #expect((try? Node(jsonText: deep)) != nil)
        #expect(throws: EmberError.self) { try Node(jsonText: deep, range: 0..<deep.count, jsonDepth: 1) }
        #expect(throws: EmberError.self) { try JSON.parse(Array("{\"p\":".utf8) + deep + Array("}".utf8)) }
    }

    /// Cut and corrupted text: refused (or built) as the tree path does, never a crash.
    @Test func damagedTextAsTheTree() {
        var g = TestSeed.generator(0xDA4A_6ED)
        for round in 0..<4_000 {
            var bytes = NodeConvertTests.random(&g, depth: 0).serializedBytes()
            guard !bytes.isEmpty else { continue }
            switch Int.random(in: 0..<3, using: &g) {
            case 0: bytes.removeLast(Int.random(in: 1...bytes.count, using: &g))
            case 1: bytes[Int.random(in: 0..<bytes.count, using: &g)] = UInt8.random(in: 0...255, using: &g)
            default: bytes.insert([0x22, 0x5C, 0x2C, 0x7B, 0x5D, 0xC3, 0x00].randomElement(using: &g)!, at: Int.random(in: 0...bytes.count, using: &g))
            }
            let want = Self.outcome { () throws(EmberError) in try Node(json: JSON.parse(bytes)) }
            let got = Self.outcome { () throws(EmberError) in try Node(jsonText: bytes) }
            #expect(Self.same(got, want), "round \(round): \(bytes)")
        }
    }
}
