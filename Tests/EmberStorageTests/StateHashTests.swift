import EmberCore
import EmberTestSupport
import Foundation
import Testing
@testable import EmberStorage

/// The state hash is what members compare and what archive segments record: computed streaming
/// (swift-crypto's SHA-1, records read in place), it must equal the first definition bit for bit:
/// the portable SHA-1 over 1 MiB runs of `varint, key, varint, value` built in memory.
@Suite struct StateHashTests {
    static func reference(_ store: EmberStore, prefix: [UInt8] = []) throws -> String {
        try store.withRead { t in
            var digests: [UInt8] = []
            var buf: [UInt8] = []
            func add(_ k: [UInt8], _ d: [UInt8]) {
                var w = ByteWriter()
                w.varint(k.count); w.bytes += k; w.varint(d.count); w.bytes += d
                buf += w.bytes
                if buf.count >= 1 << 20 { digests += SHA1.digest(buf); buf = [] }
            }
            try t.scan(store.tables.treeS, prefix: prefix) { k, v in
                if v.first == InlineObject.tag {
                    for (rk, rv) in try InlineObject.decode(v).records(at: k) { add(rk, rv) }
                } else {
                    add(k, v.first == 3 && v.count > 9 ? [1] + v[1..<(v.count - 8)] : v)
                }
                return true
            }
            digests += SHA1.digest(buf)
            return SHA1.digest(digests).map { String(format2: $0) }.joined()
        }
    }

    /// Over 1 MiB of leaves and inline objects in two namespaces (several runs), with and without
    /// long keys (the overflow table: the copying scan; without: read in place).
    @Test(arguments: [false, true]) func equalsTheFirstDefinition(longKeys: Bool) async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let s = try openStore(dir)
        defer { s.close() }
        #expect(try s.stateHash() == (try Self.reference(s)))
        var rng = SplitMix64(seed: 37)
        for batch in 0..<6 {
            var kids: KeyMap<JSON> = [:]
            for i in 0..<400 {
                let text = String(repeating: "v", count: Int(rng.next() % 1_000))
                kids["k\(batch)-\(i)"] = i % 3 == 0 ? .object(["n": .int(Int64(i)), "s": .string(text)]) : .string(text)
            }
            if longKeys { kids[String(repeating: "L", count: 600) + "\(batch)"] = .int(Int64(batch)) }
            _ = try await s.submit(namespace: batch % 2 == 0 ? "t" : "u", .update(path: p("/items"), values: kids.map { (p($0.key), $0.value) }))
        }
        _ = try await s.submit(namespace: "t", .set(path: p("/items/k0-3"), value: .null))
        #expect(try s.withRead { t in try t.hasOverflow(s.tables.treeS) } == longKeys)
        #expect(try s.stateHash() == (try Self.reference(s)))
        #expect(try s.stateHash(namespace: "u") == (try Self.reference(s, prefix: KeyCodec.namespacePrefix("u"))))
        #expect(try s.stateHash(namespace: "t") != (try s.stateHash(namespace: "u")))
    }
}

