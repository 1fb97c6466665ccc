import EmberCore
import Testing
import EmberTestSupport
@testable import EmberStorage

@Suite(.printsSeedOnFailure) struct EncodingTests {
    @Test func segmentOrderMatchesKeyOrder() {
        var g = TestSeed.generator(1)
        for _ in 0..<20_000 {
            let a = randomKey(&g), b = randomKey(&g)
            #expect(sign(memcmp(KeyCodec.segment(a), KeyCodec.segment(b))) == sign(KeyOrder.compare(a, b)), "\(a) vs \(b)")
            #expect(KeyCodec.decodeSegments(KeyCodec.segment(a)) == [a])
        }
    }

    /// `ByteReader.path` reads what `Path(string)` parses from the same bytes: the same keys, and
    /// a refusal (a corrupt entry) exactly where the string's parse fails — over random bytes
    /// drawn from slashes, key characters, characters keys may not hold, and invalid UTF-8.
    @Test func pathsReadFromBytesMatchTheStringParse() {
        var g = TestSeed.generator(7)
        let pieces: [[UInt8]] = ["/", "//", "a", "k12", "-3", "é", "😀", " ", ".", "#", "$", "[", "]", "\u{7F}", "\u{1}"].map { Array($0.utf8) }
            + [[0xFF], [0xC3], [0xE6, 0x97], [0x80]]  // invalid or cut UTF-8
        for round in 0..<20_000 {
            var raw: [UInt8] = []
            let count = round % 500 == 0 ? 70 : Int.random(in: 0...8, using: &g)  // sometimes past the depth limit
            for _ in 0..<count { raw += round % 500 == 0 ? Array("/k".utf8) : pieces.randomElement(using: &g)! }
            var w = ByteWriter()
            w.varint(raw.count)
            w.bytes.append(contentsOf: raw)
            w.u8(9)
            var r = ByteReader(w.bytes)
            let expected = try? Path(String(decoding: raw, as: UTF8.self))
            let read = try? r.path()
            #expect(read == expected, "\(raw)")
            if read != nil { #expect(try! r.u8() == 9, "the reader stops after the path") }
        }
    }

    @Test func pathOrderAndPrefixProperty() {
        var g = TestSeed.generator(2)
        func randomPath() -> Path {
            Path(validated: (0..<Int.random(in: 0...3, using: &g)).map { _ in randomKey(&g) })
        }
        for _ in 0..<10_000 {
            let a = randomPath(), b = randomPath()
            let expected = a == b ? 0 : (a < b ? -1 : 1)
            #expect(sign(memcmp(KeyCodec.encode(a), KeyCodec.encode(b))) == expected, "\(a) vs \(b)")
            // Descendants of a sort right after a and before any b that follows a and is not below it.
            let d = a.appending(randomPath())
            if a < b && !a.contains(b) {
                #expect(memcmp(KeyCodec.encode(d), KeyCodec.encode(b)) < 0, "\(d) vs \(b)")
            }
            #expect(memcmp(KeyCodec.encode(a), KeyCodec.encode(d)) <= 0)
        }
    }

    @Test func indexValueOrder() {
        var g = TestSeed.generator(3)
        func rv() -> IndexValue {
            switch Int.random(in: 0..<6, using: &g) {
            case 0: return .null
            case 1: return .bool(Bool.random(using: &g))
            case 2: return .number([-1e300, -2.5, -1, -0.0, 0, 1e-300, 1, 2, 3.5, 1e300, Double(Int64.max)].randomElement(using: &g)!)
            case 3: return .number(Double(Int.random(in: -1000...1000, using: &g)) / 7)
            case 4: return .string(["", "a", "a\u{0}", "a\u{0}b", "ab", "b", "é", String(repeating: "x", count: 70)].randomElement(using: &g)!)
            default: return .object
            }
        }
        for _ in 0..<5_000 {
            let a = rv(), b = rv()
            var ea: [UInt8] = [], eb: [UInt8] = []
            KeyCodec.appendIndexValue(a, to: &ea)
            KeyCodec.appendIndexValue(b, to: &eb)
            #expect(sign(memcmp(ea, eb)) == sign(a.compare(b)), "\(a) vs \(b)")
        }
    }

    /// `ifDataVersion` is logged as the ETag text entries always carried (older members read it):
    /// "v<version>" / "null_etag"; any other text names no version data can have.
    @Test func dataVersionConditionKeepsTheLoggedText() throws {
        #expect(LogEntry.encodeDataVersion(nil) == "null_etag" && LogEntry.encodeDataVersion(12) == "v12")
        #expect(LogEntry.decodeDataVersion("null_etag") == nil && LogEntry.decodeDataVersion("v12") == 12)
        for text in ["v007", "v", "v+5", "12", "\"v1\"", "garbage", "V1"] {
            #expect(LogEntry.decodeDataVersion(text) == .max, "\(text)")
        }
        for c: WriteCondition in [.ifDataVersion(nil), .ifDataVersion(0), .ifDataVersion(41)] {
            let e = LogEntry(index: 1, term: 1, namespace: "ns", operation: .set(path: p("/a"), value: .int(1), condition: c), timestamp: 0)
            #expect(try LogEntry(decoding: e.encoded()) == e)
        }
    }

    @Test func logEntryRoundTripKeepsNumberKinds() throws {
        let e = LogEntry(index: 7, term: 3, namespace: "ns", operation: .update(path: p("/a"), values: [
            (p("b"), .double(2.0)), (p("c/d"), .int(2)), (p("e"), j(#"{"x":[1,2.5,"s",null,true],".sv":"timestamp"}"#)),
        ], condition: .ifDataVersion(3)), timestamp: 1234)
        let d = try LogEntry(decoding: e.encoded())
        #expect(d == e)
        guard case .update(_, let vs, _) = d.operation, case .double = vs[0].1, case .int = vs[1].1 else {
            Issue.record("number kinds lost"); return
        }
        #expect(e.encoded() == d.encoded())
    }

    /// A tree record's buffer is reserved from these estimates: they must cover what is written
    /// (the record then never regrows), and the record must still decode to what was written.
    @Test func recordSizeEstimatesCoverTheEncoding() throws {
        let leaves: [Leaf] = [.bool(true), .int(-7), .double(0.5), .string(""), .string("x"),
                              .string(String(repeating: "é", count: 300)), .string(String(repeating: "k", count: 20_000))]
        let priorities: [Priority?] = [nil, .number(3), .string(""), .string(String(repeating: "p", count: 200))]
        for l in leaves {
            for p in priorities {
                let withVersion = TreeRecord.leaf(l, p, version: 42)
                #expect(withVersion.count <= 9 + l.encodedSizeEstimate + TreeRecord.sizeEstimate(p))
                let plain = TreeRecord.leaf(l, p).encoded
                #expect(plain.count <= 1 + l.encodedSizeEstimate + TreeRecord.sizeEstimate(p))
                guard case .leaf(let l2, let p2) = try TreeRecord.decode(plain), l2 == l, p2 == p else {
                    Issue.record("\(l) \(String(describing: p)) did not round-trip"); continue
                }
                #expect(try TreeRecord.version(withVersion) == 42)
            }
            if let p = priorities[1] { #expect(TreeRecord.priority(p).encoded.count <= 1 + TreeRecord.sizeEstimate(p)) }
        }
    }
}
