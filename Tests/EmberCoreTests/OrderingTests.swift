import Testing
import EmberTestSupport
@testable import EmberCore

/// Checks that `items` is strictly increasing under `cmp` for every pair (and antisymmetric).
func expectStrictOrder<T>(_ items: [T], _ cmp: (T, T) -> Int, sourceLocation: SourceLocation = #_sourceLocation) {
    for i in items.indices {
        #expect(cmp(items[i], items[i]) == 0, "\(items[i]) vs itself", sourceLocation: sourceLocation)
        for j in items.indices where i != j {
            let c = cmp(items[i], items[j])
            if i < j {
                #expect(c < 0, "\(items[i]) should sort before \(items[j])", sourceLocation: sourceLocation)
            } else {
                #expect(c > 0, "\(items[i]) should sort after \(items[j])", sourceLocation: sourceLocation)
            }
        }
    }
}

@Suite("Key order", .printsSeedOnFailure)
struct KeyOrderTests {
    @Test("int32 keys first numerically, then strings by UTF-16 code units")
    func keyOrder() {
        let keys = [
            KeyOrder.minName,
            "-2147483648", "-1000", "-10", "-2", "-1", "0", "-0", "00", "1", "01", "001", "2", "9", "10", "0010",
            "100", "2147483647",
            "", "!", "-", "-2147483649", "-a", "0.5", "1 ", "10a", "1e3", "2147483648", "9999999999", "99999999999",
            "A", "Z", "[", "_", "a", "aa", "ab", "b", "z", "é", "€", "😀", "\u{FF01}", "\u{FFFF}", KeyOrder.maxName,
        ]
        expectStrictOrder(keys, KeyOrder.compare)
    }

    @Test("int32Value follows ^-?0*\\d{1,10}$ within Int32")
    func int32Value() {
        #expect(KeyOrder.int32Value("0") == 0)
        #expect(KeyOrder.int32Value("-0") == 0)
        #expect(KeyOrder.int32Value("007") == 7)
        #expect(KeyOrder.int32Value("-007") == -7)
        #expect(KeyOrder.int32Value("2147483647") == Int32.max)
        #expect(KeyOrder.int32Value("-2147483648") == Int32.min)
        #expect(KeyOrder.int32Value("0000000000002147483647") == Int32.max)
        #expect(KeyOrder.int32Value("2147483648") == nil)
        #expect(KeyOrder.int32Value("-2147483649") == nil)
        #expect(KeyOrder.int32Value("12345678901") == nil)
        #expect(KeyOrder.int32Value("") == nil)
        #expect(KeyOrder.int32Value("-") == nil)
        #expect(KeyOrder.int32Value("+1") == nil)
        #expect(KeyOrder.int32Value(" 1") == nil)
        #expect(KeyOrder.int32Value("1.0") == nil)
        #expect(KeyOrder.int32Value("--1") == nil)
        #expect(KeyOrder.int32Value("١") == nil)  // Arabic-Indic digit
    }

    @Test("equal integers: shorter text first")
    func equalIntegers() {
        #expect(KeyOrder.compare("1", "01") < 0)
        #expect(KeyOrder.compare("01", "1") > 0)
        #expect(KeyOrder.compare("0", "-0") < 0)
        #expect(KeyOrder.compare("-1", "-01") < 0)
        // Same number and length: still a total order (by bytes), never 0 for distinct keys.
        #expect(KeyOrder.compare("-0", "00") != 0)
        #expect(KeyOrder.compare("-0", "00") == -KeyOrder.compare("00", "-0"))
    }

    @Test("strings compare by UTF-16 code units (the JS SDK's `<`), not Swift's String order")
    func bytes() {
        // U+1F600 (D83D DE00 in UTF-16) < U+E000 and U+FF01, though its code point is larger.
        #expect(KeyOrder.compare("😀", "\u{E000}") < 0)
        #expect(KeyOrder.compare("😀", "\u{FF01}") < 0)
        #expect(KeyOrder.compare("\u{D7FF}", "😀") < 0)
        #expect(KeyOrder.compare("\u{FFFF}", "\u{E000}") > 0)
        // Precomposed é (C3 A9) vs e + combining acute (65 CC 81): Swift treats them as equal.
        #expect(KeyOrder.compare("\u{E9}", "e\u{301}") > 0)
        #expect(KeyOrder.compareText("\u{E9}", "e\u{301}") > 0)
        #expect(KeyOrder.compareText("a", "a") == 0)
        #expect(KeyOrder.compareText("a", "ab") < 0)
        #expect(KeyOrder.compareText("B", "a") < 0)
        #expect(KeyOrder.less("a", "b"))
        #expect(!KeyOrder.less("b", "a"))
    }

    @Test("compareText is UTF-16 code unit order on random strings over every UTF-8 length class")
    func textOrderIsUTF16Order() {
        var rng = TestSeed.generator(7)
        // Boundaries of each UTF-8 lead byte class and the surrogate gap, plus their neighbours.
        let scalars: [UInt32] = [0x41, 0x7F, 0x80, 0x7FF, 0x800, 0xFFF, 0x1000, 0xD7FF, 0xE000, 0xE9,
                                 0xEFFF, 0xF000, 0xFF01, 0xFFFD, 0xFFFF, 0x10000, 0x1F600, 0x10FFFF, 0x301]
        for _ in 0..<5_000 {
            func word() -> String {
                let n = Int.random(in: 0...3, using: &rng)
                return String(String.UnicodeScalarView((0..<n).map { _ in
                    Unicode.Scalar(scalars.randomElement(using: &rng)!)!
                }))
            }
            let a = word(), b = word()
            let expected = a.utf16.elementsEqual(b.utf16) ? 0 : (a.utf16.lexicographicallyPrecedes(b.utf16) ? -1 : 1)
            #expect(KeyOrder.compareText(a, b) == expected, "\(Array(a.unicodeScalars)) vs \(Array(b.unicodeScalars))")
            // The mapped bytes the storage encoding keeps order the same way.
            let ma = a.utf8.map(KeyOrder.textOrderByte), mb = b.utf8.map(KeyOrder.textOrderByte)
            let byMapped = ma == mb ? 0 : (ma.lexicographicallyPrecedes(mb) ? -1 : 1)
            #expect(byMapped == expected)
            #expect(String(decoding: ma.map { KeyOrder.textByte(fromOrderByte: $0) }, as: UTF8.self).utf8.elementsEqual(a.utf8))
            // A text key's sort key (the storage's key bytes) is exactly its mapped bytes,
            // copied at once and mapped in place; after bytes already in the buffer, as a path's
            // keys are written one after another.
            if !a.isEmpty, KeyOrder.int32Value(utf8: a.utf8) == nil {
                var out: [UInt8] = [0xEE, 0xEF]
                KeyOrder.appendSortKey(a, to: &out)
                #expect(out == [0xEE, 0xEF, 0x02] + ma + [0x00], "\(Array(a.unicodeScalars))")
            }
        }
    }

    @Test("random keys: a consistent total order")
    func randomTotalOrder() {
        var rng = TestSeed.generator(42)
        let pieces = ["0", "1", "-", "9", "00", "a", "é", "😀", "2147483647", "2147483648", "-2147483648"]
        var keys = Set<String>()
        while keys.count < 200 {
            let n = Int.random(in: 1...3, using: &rng)
            keys.insert((0..<n).map { _ in pieces.randomElement(using: &rng)! }.joined())
        }
        let sorted = keys.sorted(by: KeyOrder.less)
        for i in sorted.indices.dropFirst() {
            #expect(KeyOrder.compare(sorted[i - 1], sorted[i]) < 0)
            #expect(KeyOrder.compare(sorted[i], sorted[i - 1]) > 0)
        }
        // Transitivity on random triples.
        let arr = Array(keys)
        for _ in 0..<2000 {
            let a = arr.randomElement(using: &rng)!, b = arr.randomElement(using: &rng)!, c = arr.randomElement(using: &rng)!
            if KeyOrder.compare(a, b) < 0 && KeyOrder.compare(b, c) < 0 {
                #expect(KeyOrder.compare(a, c) < 0, "\(a) < \(b) < \(c)")
            }
        }
    }
}

@Suite("Value order", .printsSeedOnFailure)
struct ValueOrderTests {
    @Test("null < false < true < numbers < strings < objects")
    func indexValueOrder() {
        let values: [IndexValue] = [
            .null, .bool(false), .bool(true), .number(-.greatestFiniteMagnitude), .number(-1e10), .number(-1),
            .number(-0.5), .number(0), .number(1e-300), .number(1), .number(1.5), .number(2), .number(1e300),
            .string(""), .string("-1"), .string("1"), .string("A"), .string("a"), .string("aa"), .string("b"),
            .string("é"), .object,
        ]
        expectStrictOrder(values) { $0.compare($1) }
        #expect(IndexValue.object.compare(.object) == 0)
        #expect(IndexValue.number(-0.0).compare(.number(0)) == 0)
    }

    @Test("IndexValue from nodes")
    func fromNodes() {
        #expect(IndexValue(node: .empty) == .null)
        #expect(IndexValue(node: node("false")) == .bool(false))
        #expect(IndexValue(node: node("3")) == .number(3))
        #expect(IndexValue(node: node("3.5")) == .number(3.5))
        #expect(IndexValue(node: node(#""s""#)) == .string("s"))
        #expect(IndexValue(node: node(#"{"a":1}"#)) == .object)
        #expect(IndexValue(json: .array([])) == nil)
        #expect(IndexValue(json: .object([:])) == nil)
        #expect(IndexValue(json: .int(2)) == .number(2))
        #expect(IndexValue(priority: nil) == .null)
        #expect(IndexValue(priority: .string("p")) == .string("p"))
    }

    /// Keys of `data`'s children in `index` order.
    func order(_ data: String, _ index: QueryIndex) -> [String] {
        QuerySpec(index: index).sortedChildren(of: node(data)).map(\.key)
    }

    @Test("value index: by type and value, ties by key")
    func valueIndex() {
        let data = #"""
            {"s2":"b","s1":"a","n3":10,"n2":2,"n1":-1,"t":true,"f":false,"o2":{"x":1},"o1":{"y":0},
             "2":5,"1":5,"b":5,"a":5,"sx":"a"}
            """#
        #expect(order(data, .value) == ["f", "t", "n1", "n2", "1", "2", "a", "b", "n3", "s1", "sx", "s2", "o1", "o2"])
        // 1 and 1.0 tie and fall back to the key.
        #expect(order(#"{"b":1,"a":1.0,"c":0.5}"#, .value) == ["c", "a", "b"])
    }

    @Test("child index on deep paths; missing children are null")
    func childIndex() {
        let data = #"""
            {"a":{"d":{"h":3}},"b":{"d":{"h":"x"}},"c":{"d":1},"e":{"d":{"h":false}},"f":{"d":{"h":-7}},
             "g":"leaf","h":{"d":{"h":{"deep":1}}},"i":{"other":1}}
            """#
        // null group (c: d is a leaf so d/h is missing; g is a leaf; i lacks d) ties by key.
        #expect(order(data, .child(path("d/h"))) == ["c", "g", "i", "e", "f", "a", "b", "h"])
        #expect(QueryIndex.child(path("d/h")).indexValue(of: node(#"{"d":{"h":2}}"#)) == .number(2))
        #expect(QueryIndex.key.indexValue(of: node("1")) == .null)
    }

    @Test("priority order: none, numbers, strings; ties by key with integer keys first")
    func priorityOrder() {
        let data = #"""
            {"a":{".value":1,".priority":"b"},"b":{".value":1,".priority":"a"},"c":{".value":1,".priority":2},
             "d":{".value":1,".priority":-3.5},"e":1,"10":1,"9":1,"f":{"x":1,".priority":2},"g":{".value":1,".priority":"10"}}
            """#
        #expect(order(data, .priority) == ["9", "10", "e", "d", "c", "f", "g", "b", "a"])
    }

    @Test("key index ignores values")
    func keyIndex() {
        #expect(order(#"{"b":1,"a":2,"10":0,"9":{"x":1},"-1":true}"#, .key) == ["-1", "9", "10", "a", "b"])
        let a = (key: "a", node: node("2")), b = (key: "b", node: node("1"))
        #expect(QueryIndex.key.compare(a, b) < 0)
        #expect(QueryIndex.value.compare(a, b) > 0)
    }

    @Test("wire and REST names of indexes")
    func names() {
        #expect(QueryIndex.priority.wireName == ".priority")
        #expect(QueryIndex.key.wireName == ".key")
        #expect(QueryIndex.value.wireName == ".value")
        #expect(QueryIndex.child(path("a/b")).wireName == "a/b")
        #expect(QueryIndex.priority.description == "$priority")
        #expect(QueryIndex.key.description == "$key")
        #expect(QueryIndex.value.description == "$value")
        #expect(QueryIndex.child(path("a/b")).description == "a/b")
    }
}

extension KeyOrderTests {
    /// `sortedByKey` (integer groups parsed once per key: log entry encoding) orders a map's
    /// members exactly as sorting its keys by `less`, sentinels and all.
    @Test func sortedByKeyIsLessOrder() {
        var g = TestSeed.generator(0x50_27ED)
        let pool = ["-2147483648", "-1000", "-10", "-2", "-1", "0", "-0", "00", "1", "01", "001", "2", "9", "10", "0010",
                    "100", "2147483647", "", "!", "-", "-2147483649", "-a", "0.5", "1 ", "10a", "1e3", "2147483648",
                    "9999999999", "99999999999", "A", "Z", "[", "_", "a", "aa", "ab", "b", "z", "é", "e\u{301}", "€", "😀",
                    "\u{FF01}", "\u{FFFF}", KeyOrder.minName, KeyOrder.maxName, ".priority", ".value"]
        let alphabet = Array("0123456789-aZé😀\u{FF01}")
        for round in 0..<2_000 {
            var members: KeyMap<JSON> = [:]
            for i in 0..<Int.random(in: 0...12, using: &g) {
                let key = Bool.random(using: &g) ? pool.randomElement(using: &g)!
                    : String((0..<Int.random(in: 0...6, using: &g)).map { _ in alphabet.randomElement(using: &g)! })
                members[key] = .int(Int64(i))
            }
            if round % 7 != 0 { members[KeyOrder.minName] = nil; members[KeyOrder.maxName] = nil }
            let fast = KeyOrder.sortedByKey(members)
            // By bytes: "é" and "e\u{301}" are one String under `==`.
            #expect(fast.map { Array($0.key.utf8) } == members.keys.sorted(by: KeyOrder.less).map { Array($0.utf8) }, "round \(round)")
            #expect(fast.allSatisfy { members[$0.key] == $0.value })
        }
    }
}
