import Testing
import EmberTestSupport
@testable import EmberCore

@Suite("JSON", .printsSeedOnFailure)
struct JSONTests {
    func parses(_ text: String) -> JSON? { try? JSON.parse(text) }

    func rejects(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let err = errorOf { try JSON.parse(text) }
        guard case .invalidJSON? = err else {
            Issue.record("\(text.debugDescription) should be rejected, got \(String(describing: err))",
                         sourceLocation: sourceLocation)
            return
        }
    }

    /// `unorderedBytes` (an import's request bodies) is the same value, members in any order.
    @Test func unorderedBytesParseToTheSameValue() throws {
        var g = TestSeed.generator(0x0DE7_0001)
        for round in 0..<500 {
            let v = JSONEventReaderTests.randomJSON(&g)
            #expect(try JSON.parse(v.unorderedBytes()) == v, "round \(round)")
        }
    }

    @Test("scalars")
    func scalars() throws {
        #expect(try JSON.parse("null") == .null)
        #expect(try JSON.parse("true") == .bool(true))
        #expect(try JSON.parse("false") == .bool(false))
        #expect(try JSON.parse("  \t\r\n 42 \n") == .int(42))
        #expect(try JSON.parse("\"hi\"") == .string("hi"))
        #expect(try JSON.parse("[]") == .array([]))
        #expect(try JSON.parse("{}") == .object([:]))
    }

    @Test("64-bit integers stay exact; larger integers become doubles")
    func integers() throws {
        guard case .int(let max) = try JSON.parse("9223372036854775807") else {
            Issue.record("Int64.max should parse as int")
            return
        }
        #expect(max == Int64.max)
        guard case .int(let min) = try JSON.parse("-9223372036854775808") else {
            Issue.record("Int64.min should parse as int")
            return
        }
        #expect(min == Int64.min)
        #expect(try JSON.parse("9223372036854775807").serialized() == "9223372036854775807")
        #expect(try JSON.parse("-9223372036854775808").serialized() == "-9223372036854775808")
        // Python's 2**63 is one past Int64.max.
        guard case .double(let big) = try JSON.parse("9223372036854775808") else {
            Issue.record("2**63 should parse as a double")
            return
        }
        #expect(big == 9223372036854775808.0)
        guard case .double(let neg) = try JSON.parse("-9223372036854775809") else {
            Issue.record("-(2**63)-1 should parse as a double")
            return
        }
        #expect(neg == -9223372036854775808.0)
        guard case .double(let huge) = try JSON.parse("123456789012345678901234567890") else {
            Issue.record("30-digit integer should parse as a double")
            return
        }
        #expect(huge == 1.2345678901234568e29)
        // Distinguishes neighbours a double could not.
        #expect(try JSON.parse("9007199254740993") != JSON.parse("9007199254740992"))
    }

    @Test("1 equals 1.0")
    func intDoubleEquality() throws {
        #expect(try JSON.parse("1") == JSON.parse("1.0"))
        #expect(try JSON.parse("1") == JSON.parse("1e0"))
        #expect(try JSON.parse("100") == JSON.parse("1E2"))
        #expect(try JSON.parse("1") != JSON.parse("1.5"))
        #expect(try JSON.parse("[1,{\"a\":2}]") == JSON.parse("[1.0,{\"a\":2.0}]"))
        #expect(try JSON.parse("1.0").serialized() == "1")
        #expect(JSON.double(2.0).serialized() == "2")
        #expect(try JSON.parse("1") != JSON.parse("true"))
        #expect(try JSON.parse("1") != JSON.parse("\"1\""))
    }

    @Test("doubles: -0.0, exponents, fractions")
    func doubles() throws {
        guard case .double(let negZero) = try JSON.parse("-0.0") else {
            Issue.record("-0.0 should be a double")
            return
        }
        #expect(negZero == 0 && negZero.sign == .minus)
        #expect(try JSON.parse("-0.0") == JSON.parse("0"))
        // Negative zero survives a round trip, so data read back hashes like the stored value (§6.8).
        guard case .double(let back) = try JSON.parse(JSON.double(-0.0).serialized()) else {
            Issue.record("-0.0 should serialize as a double")
            return
        }
        #expect(back.sign == .minus)
        let stored = try Node(json: JSON.parse("-0.0"))
        #expect(try Node(json: JSON.parse(stored.toJSON().serialized())).firebaseHash == stored.firebaseHash)
        #expect(try JSON.parse("1e+300") == .double(1e300))
        #expect(try JSON.parse("1E-300") == .double(1e-300))
        #expect(try JSON.parse("-2.5e3") == .double(-2500))
        #expect(try JSON.parse("3.14") == .double(3.14))
        #expect(try JSON.parse("0.1") == .double(0.1))
        #expect(try JSON.parse("1e+300").serialized() == "1e+300")
        // Serialized doubles parse back to the same value.
        for d in [3.14, 0.1, -2.5e-7, 1e300, 1.7976931348623157e308, Double.leastNonzeroMagnitude, 123456.789, 1e16, 2.5e15] {
            let text = JSON.double(d).serialized()
            #expect(try JSON.parse(text) == .double(d), "\(d) → \(text)")
        }
    }

    @Test("malformed numbers are rejected", arguments: [
        "01", "-", "1.", ".5", "1e", "1e+", "+1", "--1", "0x10", "1.5.2", "NaN", "-NaN", "Infinity",
        "-Infinity", "nan", "inf", "1e400", "-1e400",
    ])
    func badNumbers(_ text: String) {
        rejects(text)
    }

    @Test("string escapes")
    func escapes() throws {
        #expect(try JSON.parse(#""a\"b\\c\/d\b\f\n\r\t""#) == .string("a\"b\\c/d\u{8}\u{C}\n\r\t"))
        #expect(try JSON.parse(#""\u0041\u00e9\u00E9\u20ac""#) == .string("Aéé€"))
        #expect(try JSON.parse(#""\u0000""#) == .string("\u{0}"))
        // Surrogate pairs, upper and lower case hex.
        #expect(try JSON.parse(#""\ud83d\ude00""#) == .string("😀"))
        #expect(try JSON.parse(#""\uD834\uDD1E""#) == .string("𝄞"))
        // Raw UTF-8 passes through.
        #expect(try JSON.parse("\"日本語 😀\"") == .string("日本語 😀"))
    }

    @Test("lone and malformed surrogates are rejected", arguments: [
        #""\ud83d""#, #""\ud83dx""#, #""\ud83d\u0041""#, #""\ude00""#, #""\ude00\ud83d""#,
        #""\ud83d\ud83d""#, #""\ud83d\n""#,
    ])
    func loneSurrogates(_ text: String) {
        rejects(text)
    }

    @Test("bad escapes and unescaped control characters are rejected", arguments: [
        #""\x41""#, #""\u12""#, #""\u12G4""#, #""\'""#, "\"a\nb\"", "\"a\tb\"", "\"\u{1}\"", #""abc"#, #""\"#,
    ])
    func badStrings(_ text: String) {
        rejects(text)
    }

    @Test("invalid UTF-8 is rejected")
    func invalidUTF8() throws {
        let cases: [[UInt8]] = [
            [0x22, 0xFF, 0x22],  // never valid
            [0x22, 0xC3, 0x22],  // truncated 2-byte sequence
            [0x22, 0xC0, 0xAF, 0x22],  // overlong '/'
            [0x22, 0xED, 0xA0, 0x80, 0x22],  // UTF-8 encoded surrogate
            [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22],  // beyond U+10FFFF
            [0x22, 0x5C, 0x6E, 0x80, 0x22],  // after an escape (slow path)
            [0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D],  // in a key
        ]
        for bytes in cases {
            let err = errorOf { try JSON.parse(bytes) }
            guard case .invalidJSON? = err else {
                Issue.record("\(bytes) should be rejected, got \(String(describing: err))")
                continue
            }
        }
        #expect(try JSON.parse([0x22, 0xC3, 0xA9, 0x22] as [UInt8]) == .string("é"))
    }

    @Test("trailing garbage and structural errors are rejected", arguments: [
        "", " ", "1 2", "{} x", "[]]", "nullx", "truee", "tru", "nul", "[1,]", "[,1]", "{\"a\":1,}", "{\"a\" 1}",
        "{a:1}", "{'a':1}", "{\"a\":}", "[1 2]", "{\"a\":1 \"b\":2}", "[", "{", "{\"a\"", "\"abc", "// c\n1",
        "True", "None",
    ])
    func structural(_ text: String) {
        rejects(text)
    }

    @Test("nesting deeper than the limit is rejected")
    func nesting() throws {
        let max = Limits.maxJSONDepth
        let okArray = String(repeating: "[", count: max) + String(repeating: "]", count: max)
        #expect(parses(okArray) != nil)
        let deepArray = String(repeating: "[", count: max + 1) + String(repeating: "]", count: max + 1)
        rejects(deepArray)
        let okObject = String(repeating: "{\"a\":", count: max) + "1" + String(repeating: "}", count: max)
        #expect(parses(okObject) != nil)
        let deepObject = String(repeating: "{\"a\":", count: max + 1) + "1" + String(repeating: "}", count: max + 1)
        rejects(deepObject)
        // A custom limit.
        #expect(errorOf { try JSON.parse("[[1]]", maxDepth: 1) } != nil)
        #expect(try JSON.parse("[[1]]", maxDepth: 2) == .array([.array([.int(1)])]))
        // Very deep input fails cleanly instead of overflowing the stack.
        rejects(String(repeating: "[", count: 100_000))
    }

    @Test("Python json.dumps output parses")
    func pythonStyle() throws {
        // json.dumps({"name": "Zo\u00eb", "n": [1, 2.5, None, True], "nested": {"k": -0.0}})
        let text = #"{"name": "Zo\u00eb", "n": [1, 2.5, null, true], "nested": {"k": -0.0}, "e": "\ud83d\ude00"}"#
        let v = try JSON.parse(text)
        #expect(v["name"] == .string("Zoë"))
        #expect(v["n"] == .array([.int(1), .double(2.5), .null, .bool(true)]))
        #expect(v["nested"]?["k"] == .double(-0.0))
        #expect(v["e"] == .string("😀"))
        // indent=2 style with newlines.
        let pretty = "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {}\n}"
        #expect(try JSON.parse(pretty) == .object(["a": .array([.int(1), .int(2)]), "b": .object([:])]))
    }

    @Test("repeated keys keep the last value")
    func duplicateKeys() throws {
        #expect(try JSON.parse(#"{"a":1,"a":2}"#) == .object(["a": .int(2)]))
    }

    @Test("serialization is compact, escaped and in key order")
    func serialization() throws {
        let v = JSON.object([
            "b": .int(1), "a": .array([.null, .bool(true), .bool(false)]), "10": .string("x"), "9": .double(1.5),
            "s": .string("q\"b\\n\nt\tc\u{1}d\u{7F}é😀/"),
        ])
        #expect(v.serialized() == #"{"9":1.5,"10":"x","a":[null,true,false],"b":1,"s":"q\"b\\n\nt\tc\u0001d\u007fé😀/"}"#)
        #expect(v.serializedBytes() == Array(v.serialized().utf8))
        #expect(JSON.object([:]).serialized() == "{}")
        #expect(JSON.array([]).serialized() == "[]")
        #expect(JSON.string("").serialized() == "\"\"")
        #expect(JSON.double(0.0).serialized() == "0")
        #expect(JSON.double(-0.0).serialized() == "-0.0")
        // Every control character survives a round trip.
        let controls = String(String.UnicodeScalarView((0..<32).map { Unicode.Scalar(UInt8($0)) }))
        #expect(try JSON.parse(JSON.string(controls).serialized()) == .string(controls))
    }

    @Test("pretty output parses back to the same value")
    func pretty() throws {
        let v = try JSON.parse(#"{"a":[1,2,{"b":null}],"c":{},"d":"x"}"#)
        let text = v.serialized(pretty: true)
        #expect(text.contains("\n"))
        #expect(try JSON.parse(text) == v)
    }

    @Test("random documents round trip through the writer and parser")
    func randomRoundTrip() throws {
        var rng = TestSeed.generator(0x5EED_0001)
        func randomString() -> String {
            let pool: [Unicode.Scalar] = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\u{0}", "\u{1F}", "\u{7F}",
                                          "é", "€", "\u{FFFF}", "😀", "\u{10FFFF}", "\u{E000}"]
            let n = Int.random(in: 0..<8, using: &rng)
            return String(String.UnicodeScalarView((0..<n).map { _ in pool.randomElement(using: &rng)! }))
        }
        func randomJSON(_ depth: Int) -> JSON {
            switch Int.random(in: 0..<(depth > 3 ? 6 : 8), using: &rng) {
            case 0: return .null
            case 1: return .bool(Bool.random(using: &rng))
            case 2: return .int(Int64.random(in: Int64.min...Int64.max, using: &rng))
            case 3: return .double(Double(Int32.random(in: Int32.min...Int32.max, using: &rng)) / 1024)
            case 4: return .double(Double(bitPattern: UInt64.random(in: 0..<0x7FF0_0000_0000_0000, using: &rng)))
            case 5: return .string(randomString())
            case 6: return .array((0..<Int.random(in: 0..<4, using: &rng)).map { _ in randomJSON(depth + 1) })
            default:
                var o: KeyMap<JSON> = [:]
                for _ in 0..<Int.random(in: 0..<4, using: &rng) { o[randomString()] = randomJSON(depth + 1) }
                return .object(o)
            }
        }
        for _ in 0..<500 {
            let v = randomJSON(0)
            let text = v.serialized()
            let back = try JSON.parse(text)
            #expect(back == v, "\(text)")
            #expect(back.serialized() == text)
        }
    }

    @Test("accessors")
    func accessors() throws {
        let v = try JSON.parse(#"{"a":"s","n":2,"d":2.5,"z":null}"#)
        #expect(v["a"]?.stringValue == "s")
        #expect(v["n"]?.numberValue == 2)
        #expect(v["d"]?.numberValue == 2.5)
        #expect(v["z"]?.isNull == true)
        #expect(v["missing"] == nil)
        #expect(v.objectValue?.count == 4)
        #expect(!v.isPrimitive)
        #expect(JSON.int(1).isPrimitive)
        #expect(JSON.int(1)["a"] == nil)
    }
}
