import CLMDB
import EmberCore
import Foundation
import Testing
import EmberTestSupport
@testable import EmberStorage

/// Index rows whose key holds the exact index value keep an empty value (`IndexRowValue`); rows
/// of the format before (offset + exact value) still read, and snapshots carry that format.
@Suite(.printsSeedOnFailure) struct IndexRowValueTests {
    @Test func indexValuesReadBackFromTheirKeyEncoding() throws {
        var g = TestSeed.generator(3)
        var values: [IndexValue] = [.null, .bool(false), .bool(true), .object, .number(0), .number(-0.0), .number(1e300),
                                    .number(-1e-300), .number(.infinity), .number(-.infinity), .number(Double(Int64.max)),
                                    .string(""), .string("a\u{0}b"), .string("\u{0}"), .string("日本😀"),
                                    .string(String(repeating: "x", count: KeyCodec.indexStringBytes)),
                                    .string(String(repeating: "\u{0}", count: KeyCodec.indexStringBytes / 2))]
        for _ in 0..<300 {
            let d = Double(bitPattern: g.next())
            values.append(.number(d.isNaN ? 1 : d))  // any double but NaN (JSON has none)
        }
        for _ in 0..<100 { values.append(.number(Double(Int64.random(in: -1_000_000...1_000_000, using: &g)))) }
        for v in values {
            var key: [UInt8] = [9, 9]
            let cut = KeyCodec.appendIndexValue(v, to: &key)
            let end = key.count
            key += KeyCodec.segment("child")
            var i = 2
            let read = KeyCodec.readIndexValue(key, &i)
            #expect(read != nil && read!.truncated == cut && i == end, "\(v)")
            if case .number(let d)? = read.map({ $0.0 }), case .number(let e) = v {
                #expect(d.bitPattern == (e == 0 ? 0.0 : e).bitPattern, "\(v)")
            } else {
                #expect(read?.0 == v)
            }
        }
        // Cut strings: flagged, and their rows keep the exact value.
        let long = IndexValue.string(String(repeating: "y", count: KeyCodec.indexStringBytes + 1))
        var key: [UInt8] = []
        #expect(KeyCodec.appendIndexValue(long, to: &key))
        var i = 0
        #expect(KeyCodec.readIndexValue(key, &i)?.truncated == true)
        let d = IndexDef(patternText: "/items", pattern: ["items"], index: .value)
        #expect(Applier.indexRow(ns: "t", def: d, location: p("/items"), childKey: "a", value: long).value.count > 2)
        #expect(Applier.indexRow(ns: "t", def: d, location: p("/items"), childKey: "a", value: .number(5)).value.isEmpty)
        // Malformed keys are refused, not misread.
        for bad: [UInt8] in [[], [0x40, 1, 2], [0x50, 0x61], [0x50, 0, 0x05], [0x77]] {
            var j = 0
            #expect(KeyCodec.readIndexValue(bad, &j) == nil)
        }
    }

    /// Snapshots carry every row keyed by its location key with offset + exact value (what every
    /// version installs); installing puts them under location ids, compact, and the index stays
    /// exact under writes.
    @Test func snapshotsCarryFullValuesAndInstallCompact() async throws {
        let s = try openStore()
        defer { s.close() }
        let long = String(repeating: "z", count: 100)
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/items", indexes: ["h", ".value"]),
                                                try IndexSpec(location: "/u/$id/p", indexes: ["h"])])
        var parts: [(String, String)] = []
        for i in 0..<40 { parts.append(("c\(i)", i % 3 == 0 ? #"{"h": "\#(long)\#(i % 5)"}"# : #"{"h": \#(i % 7), "n": "x"}"#)) }
        parts.append(("leaf", "3"))
        try await s.update("/items", parts)
        try await s.set("/u/a/p/q", #"{"h": true}"#)
        let compact = try s.withRead { t in try DerivedIndexTests.rows(t, s.tables) }
        #expect(compact.filter { $0.value.isEmpty }.count > 40 && compact.contains { !$0.value.isEmpty })
        func check(_ store: EmberStore) throws {
            let model = try store.get("/items")
            for spec in [QuerySpec(index: .child(p("h")), limit: 5, limitFromStart: false), QuerySpec(index: .child(p("h"))),
                         QuerySpec(index: .value, limit: 3),
                         QuerySpec(index: .child(p("h")), start: QueryBound(value: .number(2)), end: QueryBound(value: .string(long + "3")))] {
                #expect(try store.query(namespace: "t", path: p("/items"), spec: spec).map(\.key) == spec.window(of: model).map(\.key), "\(spec)")
            }
        }
        try check(s)
        let recs = try DerivedIndexTests.records(s)
        let streamed = recs.filter { $0.0 == 2 }
        #expect(streamed.map(\.1) == compact.map(\.key))
        #expect(streamed.allSatisfy { $0.2.count >= 3 })
        #expect(streamed.map { try! IndexRowValue.compacted(key: $0.1, value: $0.2) } == compact.map(\.value))
        var chunks: [[UInt8]] = []
        try s.snapshot(maxChunkBytes: 400) { chunks.append($0) }
        let follower = try openStore()
        defer { follower.close() }
        try await follower.installSnapshot(chunks: chunks)
        #expect(try follower.withRead { t in try DerivedIndexTests.rows(t, follower.tables) } == compact)
        try check(follower)
        // Stored rows are compact: only cut strings keep a value.
        let storedValues = try follower.withRead { t in
            var out: [[UInt8]] = []
            try t.scan(follower.tables.idxS, prefix: []) { _, v in out.append(v); return true }
            return out
        }
        #expect(storedValues.filter(\.isEmpty).count == compact.filter(\.value.isEmpty).count)
        // Writes keep the index exact.
        for store in [s, follower] {
            try await store.update("/items", [("c1", #"{"h": -1}"#), ("c3", "null"), ("c4/h", #""\#(long)""#), ("new", #"{"h": 2.5}"#)])
            try check(store)
            let (stored, rebuilt) = try await DerivedIndexTests.storedAndRebuilt(store)
            #expect(stored == rebuilt)
        }
    }
}
