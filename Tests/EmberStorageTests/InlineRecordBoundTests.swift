import EmberCore
import EmberTestSupport
import Testing
@testable import EmberStorage

/// `InlineObject.record(for:)` refuses an object early by its record's exact size, counted
/// without building it (`encodedSize`), and decides as building and encoding the record decides:
/// the same record, or none, for objects around the size limit.
@Suite(.printsSeedOnFailure) struct InlineRecordBoundTests {
    /// The record as built before the early refusals: children by segment, encoded, kept when
    /// within the size limit.
    static func built(_ node: Node, key: [UInt8], version: UInt64) -> [UInt8]? {
        encoded(node, key: key, version: version).flatMap { $0.count <= InlineObject.maxEncodedBytes ? $0 : nil }
    }

    /// The record's bytes whatever their size (nil: not an object of leaves, or keys too long).
    static func encoded(_ node: Node, key: [UInt8], version: UInt64) -> [UInt8]? {
        guard node.leaf == nil, !node.children.isEmpty, node.children.count <= InlineObject.maxChildren else { return nil }
        var kids: [(seg: [UInt8], child: InlineObject.Child)] = []
        for (k, c) in node.children {
            guard let l = c.leaf else { return nil }
            let seg = KeyCodec.segment(k)
            guard key.count + seg.count <= SplitTable.inlineBytes else { return nil }
            kids.append((seg, InlineObject.Child(key: k, leaf: l, priority: c.priority)))
        }
        kids.sort { bytesLess($0.seg, $1.seg) }
        return InlineObject(version: version, priority: node.priority, children: kids.map(\.child)).encoded
    }

    @Test func theCountedSizeDecidesAsTheRecord() throws {
        var g = TestSeed.generator(0x5EED_4204)
        var kept = 0, refused = 0
        for round in 0..<4_000 {
            var o: KeyMap<JSON> = [:]
            for i in 0..<Int.random(in: 1...18, using: &g) {
                let key = ["k\(i)", "\(i)", "long-key-\(i)-" + String(repeating: "é", count: Int.random(in: 0...20, using: &g))]
                    .randomElement(using: &g)!
                switch Int.random(in: 0..<9, using: &g) {
                case 0: o[key] = .bool(Bool.random(using: &g))
                case 1: o[key] = .int(Int64.random(in: .min ... .max, using: &g))
                case 2: o[key] = .double(Double(Int.random(in: -99...99, using: &g)) / 4)
                case 3: o[key] = .object([".value": .string("v"), ".priority": .int(Int64(i))])
                case 4: o[key] = .object(["deep": .int(1)])
                default: o[key] = .string(String(repeating: "s", count: Int.random(in: 0...120, using: &g)))
                }
            }
            if Bool.random(using: &g) { o[".priority"] = .string(String(repeating: "p", count: Int.random(in: 0...40, using: &g))) }
            let node = try Node(json: .object(o))
            let key = Array(repeating: UInt8(ascii: "k"), count: Int.random(in: 1...120, using: &g))
            let version = UInt64.random(in: 0...UInt64.max, using: &g)
            let want = Self.built(node, key: key, version: version)
            #expect(InlineObject.record(for: node, key: key, version: version) == want, "round \(round)")
            if let b = Self.encoded(node, key: key, version: version) {
                let size = InlineObject.encodedSize(node, version: version)
                #expect(size == (b.count <= InlineObject.maxEncodedBytes ? b.count : nil),
                        "round \(round): counted \(String(describing: size)) for a record of \(b.count) bytes")
            }
            if want == nil { refused += 1 } else { kept += 1 }
        }
        #expect(kept > 400 && refused > 400, "kept \(kept), refused \(refused)")
    }
}
