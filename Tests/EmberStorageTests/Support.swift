import EmberCore
import EmberTestSupport
import Foundation
@testable import EmberStorage

func tempDir() -> String {
    let d = TestDirectory.root + "ember-storage-\(UUID().uuidString)"
    try? FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
    return d
}

func smallOptions() -> StoreOptions {
    var o = StoreOptions()
    o.mapSize = 1 << 30
    return o
}

func openStore(_ dir: String = tempDir(), _ options: StoreOptions = smallOptions()) throws -> EmberStore {
    try EmberStore(directory: dir, options: options)
}

func p(_ s: String) -> Path { try! Path(s) }
func j(_ s: String) -> JSON { try! JSON.parse(s) }
func n(_ s: String) -> Node { try! Node(json: JSON.parse(s)) }

extension EmberStore {
    @discardableResult
    func set(_ path: String, _ json: String, ns: String = "t", _ c: WriteCondition? = nil) async throws -> WriteResult {
        try await submit(namespace: ns, .set(path: p(path), value: j(json), condition: c))
    }

    @discardableResult
    func update(_ path: String, _ parts: [(String, String)], ns: String = "t", _ c: WriteCondition? = nil) async throws -> WriteResult {
        try await submit(namespace: ns, .update(path: p(path), values: parts.map { (p($0.0), j($0.1)) }, condition: c))
    }

    func get(_ path: String, ns: String = "t") throws -> Node { try read(namespace: ns, path: p(path)).node }
    func ver(_ path: String, ns: String = "t") throws -> UInt64 { try version(namespace: ns, path: p(path)) }
}


func randomKey(_ g: inout SplitMix64) -> String {
    switch Int.random(in: 0..<10, using: &g) {
    case 0: return String(Int.random(in: -5...5, using: &g))
    case 1: return String(Int32.random(in: .min ... .max, using: &g))
    case 2: return "0" + String(Int.random(in: 0...20, using: &g))  // leading zero: int group
    case 3: return "-0"
    case 4: return String(Int64.random(in: 3_000_000_000...9_000_000_000, using: &g))  // beyond Int32
    case 5: return ["a", "b", "ab", "aa", "A", "Z", "z", "é", "日本", "😀", "a b", "-", "-a", "1a", "a1"].randomElement(using: &g)!
    default:
        let alphabet = Array("ab019-_xyzé😀 ")
        return String((0..<Int.random(in: 1...4, using: &g)).map { _ in alphabet.randomElement(using: &g)! })
    }
}

func memcmp(_ a: [UInt8], _ b: [UInt8]) -> Int {
    for (x, y) in zip(a, b) where x != y { return x < y ? -1 : 1 }
    return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
}

func sign(_ x: Int) -> Int { x < 0 ? -1 : (x > 0 ? 1 : 0) }

/// The records of snapshot chunks, in stream order: (table tag, key, value).
func snapshotRecords(_ chunks: [[UInt8]]) throws -> [(UInt8, [UInt8], [UInt8])] {
    var out: [(UInt8, [UInt8], [UInt8])] = []
    for chunk in chunks {
        var r = ByteReader(chunk)
        while !r.atEnd {
            let tag = try r.u8()
            let kn = try r.varint()
            let k = Array(chunk[r.i..<r.i + kn]); r.i += kn
            let vn = try r.varint()
            let v = Array(chunk[r.i..<r.i + vn]); r.i += vn
            out.append((tag, k, v))
        }
    }
    return out
}

extension Txn {
    /// Every trigger row under `prefix` (one starting with `triggers/`) in format 6's layout:
    /// `meta`'s and the shared change records (`trigrec`) under `triggers/r/<ns>\0<group><index>`,
    /// as stored, in key order; not the streams' heads (format 7's, local to each store).
    func scanTriggerRows(_ tables: Tables, prefix: [UInt8], _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
        var rows: [([UInt8], [UInt8])] = []
        try scan(tables.meta, prefix: prefix) { k, v in
            if !k.starts(with: TriggerRecordRows.headPrefix) { rows.append((k, v)) }
            return true
        }
        try TriggerRecordRows.legacyRows(tables, self, full: { _, _, v in v }) { k, v in
            if k.starts(with: prefix) { rows.append((k, v)) }
        }
        rows.sort { $0.0.lexicographicallyPrecedes($1.0) }
        for (k, v) in rows where try !body(k, v) { return }
    }
}
