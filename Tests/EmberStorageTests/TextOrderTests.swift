import EmberCore
import Testing
@testable import EmberStorage

/// Storage format 3 (issue 40, item 3): keys are byte strings (NFC and NFD spellings are two
/// keys) and text in keys is stored in UTF-16 order (`KeyOrder.textOrderByte`), so LMDB's order
/// is the JS SDK's. Streams and directories of format 2 (code point order) are migrated.
@Suite struct TextOrderTests {
    static let utf16Order = ["10", "a", "z", "\u{E9}", "\u{D7FF}", "\u{10000}", "\u{1F600}", "\u{E000}", "\u{FF01}", "\u{FFFF}"]

    func fill(_ s: EmberStore) async throws {
        // Reversed, so that no insertion order can pass for the key order.
        for k in Self.utf16Order.reversed() {
            try await s.submit(namespace: "t", .set(path: Path(validated: ["o", k]), value: .object(["name": .string(k + "-n")]), condition: nil))
        }
    }

    @Test func canonicallyEquivalentKeysAreStoredAsTwo() async throws {
        let s = try openStore()
        try await s.set("/u", #"{"\u00e9": 1, "e\u0301": 2}"#)
        let node = try s.get("/u")
        #expect(node.childCount == 2 && node.child("\u{E9}") == Node(.int(1)) && node.child("e\u{301}") == Node(.int(2)))
        try await s.set("/u/e\u{301}", "null")
        #expect(try s.get("/u") == Node(children: ["\u{E9}": Node(.int(1))]))
    }

    @Test func keyAndIndexOrderIsUTF16() async throws {
        let s = try openStore()
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/o", indexes: ["name"])])
        try await fill(s)
        let byKey = try s.query(namespace: "t", path: p("/o"), spec: QuerySpec(index: .key).limited(toFirst: 7)).map(\.key)
        #expect(byKey == Array(Self.utf16Order.prefix(7)))
        let byName = try s.query(namespace: "t", path: p("/o"), spec: QuerySpec(index: .child(p("name"))).limited(toLast: 3)).map(\.key)
        #expect(byName == Array(Self.utf16Order.suffix(3)))
        #expect(try s.get("/o").sortedKeys == Self.utf16Order)
    }

    @Test func integerKeysWithTheLeadBytesInTheirBinaryPrefixAreLeftAlone() throws {
        // 1845493760 = 0x6E000000: its order-preserving Int32 starts 0xEE.
        let key = [UInt8]("t".utf8) + [0] + KeyCodec.segment("1845493760") + KeyCodec.segment("\u{FF01}")
        #expect(key.contains(0xEE))
        let text = [UInt8]("t".utf8) + [0] + KeyCodec.segment("1845493760") + [0x02] + Array("\u{FF01}".utf8) + [0]
        #expect(try TextOrderMigration.migrated(text, index: nil) == key)
        #expect(try TextOrderMigration.migrated(key, index: nil) == nil)
    }

    /// A format-2 member's snapshot stream: the header without the format, key text in UTF-8.
    static func asFormat2(_ chunks: [[UInt8]]) throws -> [[UInt8]] {
        try chunks.map { chunk in
            var r = ByteReader(chunk)
            var w = ByteWriter()
            while !r.atEnd {
                let tag = try r.u8()
                let kn = try r.varint()
                var k = Array(chunk[r.i..<r.i + kn]); r.i += kn
                let vn = try r.varint()
                var v = Array(chunk[r.i..<r.i + vn]); r.i += vn
                if tag == 4 { continue }  // format 3's marker
                // No integer keys and no indexes in the test data: every 0xF5/0xF6 in a key is text.
                if tag == 0 || tag == 1 { k = k.map { KeyOrder.textByte(fromOrderByte: $0) } }
                if tag == 0xFF { v = Array(v.prefix(24)) }
                w.u8(tag); w.varint(k.count); w.bytes += k; w.varint(v.count); w.bytes += v
            }
            return w.bytes
        }
    }

    static func tags(_ chunks: [[UInt8]]) throws -> Set<UInt8> {
        var out = Set<UInt8>()
        for chunk in chunks {
            var r = ByteReader(chunk)
            while !r.atEnd {
                out.insert(try r.u8())
                r.i += try r.varint()
                r.i += try r.varint()
            }
        }
        return out
    }

    @Test func aStreamWithMovedTextCarriesARecordOlderInstallersRefuse() async throws {
        let a = try openStore()
        try await a.set("/plain", #"{"k": "v"}"#)
        var chunks: [[UInt8]] = []
        try a.snapshot { chunks.append($0) }
        #expect(try !Self.tags(chunks).contains(4))
        try await a.set("/\u{FF01}", "1")
        chunks = []
        try a.snapshot { chunks.append($0) }
        #expect(try Self.tags(chunks).contains(4))
        let b = try openStore()
        try await b.installSnapshot(chunks: chunks)
        #expect(try b.stateHash() == a.stateHash())
    }

    @Test func aSnapshotStreamOfFormat2IsInstalledInUTF16Order() async throws {
        let a = try openStore()
        for k in Self.utf16Order.reversed() where KeyOrder.int32Value(k) == nil {
            try await a.set("/o/\(k)", #"{"v": "\#(k)"}"#)
        }
        try await a.set("/deep/\u{FF01}/\u{1F600}", "1")
        var chunks: [[UInt8]] = []
        try a.snapshot(maxChunkBytes: 256) { chunks.append($0) }
        let old = try Self.asFormat2(chunks)
        #expect(old != chunks)  // the conversion changed key bytes
        let b = try openStore()
        try await b.installSnapshot(chunks: old)
        #expect(try b.stateHash() == a.stateHash())
        let keys = try b.query(namespace: "t", path: p("/o"), spec: QuerySpec(index: .key)).map(\.key)
        #expect(keys == Self.utf16Order.filter { KeyOrder.int32Value($0) == nil })
        #expect(try b.get("/deep/\u{FF01}/\u{1F600}") == Node(.int(1)))
        // This build's own stream installs as it is.
        let c = try openStore()
        try await c.installSnapshot(chunks: chunks)
        #expect(try c.stateHash() == a.stateHash())
    }
}
