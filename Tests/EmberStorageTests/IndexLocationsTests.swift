import CLMDB
import EmberCore
import Foundation
import Testing
import EmberTestSupport
@testable import EmberStorage

/// Index rows keyed by a location id (storage format 4, `IndexLocations`): the ids' encoding,
/// rows of every value type in Firebase order, many locations under one definition, definitions
/// dropped and added again, and directories of format 3 (rows keyed by location key) rebuilt
/// when they open, answering every query as before.
@Suite(.printsSeedOnFailure) struct IndexLocationsTests {
    // MARK: - Ids

    @Test func idsArePrefixFreeOrderPreservingAndRoundTrip() throws {
        var g = TestSeed.generator(41)
        var ids: [UInt64] = [1, 2, 126, 127, 128, 129, 255, 256]
        for bits in 7...55 { ids += [(1 << UInt64(bits)) - 1, 1 << UInt64(bits), (1 << UInt64(bits)) + 1] }
        ids.append((1 << 56) - 1)
        for _ in 0..<2_000 { ids.append(UInt64.random(in: 1..<(1 << UInt64(Int.random(in: 1...56, using: &g))), using: &g)) }
        ids = Array(Set(ids)).sorted()
        let encoded = ids.map(IndexLocations.encode)
        for (id, e) in zip(ids, encoded) {
            #expect(IndexLocations.decode(e[...]) == id, "\(id)")
            // Minimal: one byte per 7 bits of the id, the first 127 ids in one byte.
            #expect(e.count == max(1, (64 - id.leadingZeroBitCount + 6) / 7), "\(id) -> \(e)")
            #expect(e.first != 0)
        }
        #expect(IndexLocations.encode(127) == [0x7F] && IndexLocations.encode(128) == [0x80, 0x80])
        // Byte order is numeric order, and no id is a prefix of another.
        for (a, b) in zip(encoded, encoded.dropFirst()) {
            #expect(bytesLess(a, b), "\(a) < \(b)")
            #expect(!bytesStart(b, with: a) && !bytesStart(a, with: b))
        }
        for _ in 0..<2_000 {
            let a = encoded.randomElement(using: &g)!, b = encoded.randomElement(using: &g)!
            if a != b { #expect(!bytesStart(a, with: b)) }
        }
    }

    // MARK: - Rows

    static let cut = String(repeating: "s", count: 70)

    /// Children whose index values cover every type and the edges of each (cut strings sharing
    /// the kept prefix, an escaped 0x00, integer-group keys).
    static let items = #"""
    {"a": {"n": 1}, "b": {"h": false}, "c": {"h": true}, "d": {"h": -1e300}, "e": {"h": -2.5}, "f": {"h": 0},
     "g": {"h": 1}, "h": {"h": 9007199254740993}, "i": {"h": 1e300}, "j": {"h": ""}, "k": {"h": "a\u0000b"},
     "l": {"h": "日本😀"}, "m": {"h": "\#(cut)b"}, "n": {"h": "\#(cut)a"}, "o": {"h": "\#(cut)"},
     "p": {"h": "\#(String(repeating: "s", count: 64))"}, "q": {"h": {"x": 1}}, "1": {"h": 1}, "-3": {"h": "\#(cut)a"},
     "10": {"h": true}, "r": 5, "s": {"h": "a"}}
    """#

    /// Queries over `/items` by `h` and by value, each direction, bounds on every type.
    static var specs: [QuerySpec] {
        let h = QueryIndex.child(p("h"))
        var out: [QuerySpec] = [QuerySpec(index: h), QuerySpec(index: .value), QuerySpec(index: h, limit: 4),
                                QuerySpec(index: h, limit: 4, limitFromStart: false), QuerySpec(index: .value, limit: 2, limitFromStart: false)]
        let bounds: [IndexValue] = [.null, .bool(false), .bool(true), .number(-3), .number(0), .number(1), .number(1e300),
                                    .string(""), .string("a"), .string(cut), .string(cut + "a"), .string(cut + "b"), .object]
        for (i, v) in bounds.enumerated() {
            out.append(QuerySpec(index: h, start: QueryBound(value: v)))
            out.append(QuerySpec(index: h, end: QueryBound(value: v), limit: 3, limitFromStart: false))
            out.append(QuerySpec(index: h, start: QueryBound(value: v), end: QueryBound(value: v)))
            out.append(QuerySpec(index: h, start: QueryBound(value: v, name: "m", inclusive: i % 2 == 0), limit: 2))
            out.append(QuerySpec(index: h, start: QueryBound(value: bounds[i / 2]),
                                 end: QueryBound(value: v, name: "n", inclusive: i % 2 == 1)))
        }
        return out
    }

    static func checkQueries(_ s: EmberStore, _ note: String) throws {
        let model = try s.get("/items")
        for spec in specs {
            let got = try s.query(namespace: "t", path: p("/items"), spec: spec)
            #expect(got.map(\.key) == spec.window(of: model).map(\.key), "\(note) \(spec)")
        }
    }

    /// The stored keys (id + value + child) and what they decode to.
    static func storedRows(_ s: EmberStore) throws -> [(key: [UInt8], value: [UInt8])] {
        try s.withRead { t in
            var out: [([UInt8], [UInt8])] = []
            try t.scan(s.tables.idxS, prefix: []) { k, v in out.append((k, v)); return true }
            return out
        }
    }

    @Test func rowsOfEveryTypeRoundTripInFirebaseOrder() async throws {
        let s = try openStore()
        defer { s.close() }
        try await s.set("/items", Self.items)
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/items", indexes: ["h", ".value"])])
        try Self.checkQueries(s, "built")
        let model = try s.get("/items")
        // Logical rows (location key + value + child) are exactly what the tree gives, per child.
        let logical = try s.withRead { t in try DerivedIndexTests.rows(t, s.tables) }
        var expected: [DerivedIndexTests.Row] = []
        for d in try IndexSpec(location: "/items", indexes: ["h", ".value"]).defs {
            for (k, c) in model.children {
                let r = Applier.indexRow(ns: "t", def: d, location: p("/items"), childKey: k, value: d.index.indexValue(of: c))
                expected.append(.init(key: r.key, value: r.value))
            }
        }
        #expect(logical == expected.sorted { bytesLess($0.key, $1.key) })
        // Stored: a one-byte id + value + child segment; a value only for a cut string.
        let locKey = IndexLocations.key(ns: "t", def: IndexDef(patternText: "/items", pattern: ["items"], index: .child(p("h"))),
                                        location: p("/items"))
        let id = try #require(try s.withRead { t in try s.tables.locationId(t, locKey) })
        #expect(id.count == 1)
        let stored = try Self.storedRows(s).filter { $0.key.first == id[0] }
        #expect(stored.count == model.children.count)
        var order: [String] = []
        for row in stored {
            let (value, off) = try IndexRowValue.decode(key: row.key, value: row.value, valueStart: 1)
            var i = off
            let child = try #require(KeyCodec.readSegment(row.key, &i))
            #expect(i == row.key.count)
            #expect(value == IndexQueryValue.of(model.child(child), .child(p("h"))), "\(child)")
            #expect(row.value.isEmpty == !(value.isCutString), "\(child)")
            order.append(child)
        }
        // Stored order is Firebase order except inside a cut group (re-sorted when read).
        let firebase = QuerySpec(index: .child(p("h"))).window(of: model).map(\.key)
        #expect(order.filter { !["m", "n", "o", "-3"].contains($0) } == firebase.filter { !["m", "n", "o", "-3"].contains($0) })
        // g {h: 1}: a 1-byte id + 9 bytes of number + 3 of child segment (format 3: 23 more).
        #expect(stored.first { $0.key.suffix(3) == Array(KeyCodec.segment("g")) }?.key.count == 13)
        // Writes keep it exact.
        try await s.update("/items", [("a/h", "-1"), ("b", "null"), ("m/h", #""\#(Self.cut)c""#), ("new", #"{"h": 2.5}"#), ("r", #"{"h": null}"#)])
        try Self.checkQueries(s, "maintained")
        let (a, b) = try await DerivedIndexTests.storedAndRebuilt(s)
        #expect(a == b)
    }

    /// Many locations under one definition (ids past one byte), written whole, child by child,
    /// emptied child by child (the id goes with the last row) and dropped from above.
    @Test func manyLocationsUnderOneDefinition() async throws {
        var g = TestSeed.generator(7)
        let s = try openStore()
        defer { s.close() }
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/u/$id/p", indexes: ["h"])])
        var users: KeyMap<JSON> = [:]
        for u in 0..<300 {
            var posts: KeyMap<JSON> = [:]
            for q in 0..<Int.random(in: 1...4, using: &g) { posts["q\(q)"] = .object(["h": .int(Int64.random(in: 0...5, using: &g))]) }
            users["u\(u)"] = .object(["p": .object(posts)])
        }
        try await s.set("/u", JSON.object(users).serialized())
        func locations() throws -> Int {
            try s.withRead { t in
                var n = 0
                try t.scan(s.tables.idxlocS, prefix: []) { _, _ in n += 1; return true }
                return n
            }
        }
        func check(_ note: String) async throws {
            let (stored, rebuilt) = try await DerivedIndexTests.storedAndRebuilt(s)
            #expect(stored == rebuilt, "\(note): \(DerivedIndexTests.firstDifference(stored, rebuilt))")
            let all = try s.get("/u")
            #expect(try locations() == all.children.values.filter { !$0.child("p").children.isEmpty }.count, "\(note)")
            for u in ["u0", "u5", "u150", "u299", "new"] {
                let model = try s.get("/u/\(u)/p")
                for spec in [QuerySpec(index: .child(p("h"))), QuerySpec(index: .child(p("h")), limit: 1, limitFromStart: false),
                             QuerySpec(index: .child(p("h")), start: QueryBound(value: .number(2)), end: QueryBound(value: .number(4)))] {
                    #expect(try s.query(namespace: "t", path: p("/u/\(u)/p"), spec: spec).map(\.key) == spec.window(of: model).map(\.key),
                            "\(note) \(u) \(spec)")
                }
            }
        }
        try await check("set whole")
        #expect(try Self.storedRows(s).contains { $0.key.count > 0 && $0.key[0] >= 0x80 }, "ids past 127 take two bytes")
        // Child by child: new posts, changed values, a location emptied post by post.
        let posts = try s.get("/u/u5/p").children.keys.sorted()
        for q in posts { _ = try await s.set("/u/u5/p/\(q)", "null") }
        _ = try await s.set("/u/new/p/x", #"{"h": 3}"#)
        _ = try await s.set("/u/u0/p/q0/h", "9")
        try await check("child writes")
        // A bulk update emptying locations and filling others (rows written at its end).
        var parts: [(String, String)] = []
        for u in 100..<180 { parts.append(("u\(u)/p", u % 2 == 0 ? "null" : #"{"z": {"h": 1}}"#)) }
        try await s.update("/u", parts)
        try await check("bulk update")
        var each: [(String, String)] = []
        for u in 200..<280 { for q in 0..<4 { each.append(("u\(u)/p/q\(q)", "null")) } }
        try await s.update("/u", each)
        try await check("bulk deletes")
        // From above: every location under /u goes, then comes back.
        _ = try await s.set("/u", "null")
        #expect(try locations() == 0 && Self.storedRows(s).isEmpty)
        _ = try await s.set("/u/u1/p/a", #"{"h": 1}"#)
        try await check("after null")
    }

    /// Dropping a definition drops its rows and location ids; adding it again (by `setIndexes`
    /// or by rules in the log) builds them again under new ids.
    @Test func definitionsDroppedAndAddedAgain() async throws {
        let s = try openStore()
        defer { s.close() }
        try await s.set("/items", Self.items)
        try await s.set("/u", #"{"a": {"p": {"x": {"t": 2}, "y": {"t": 1}}}, "b": {"p": {"z": {"t": 0}}}}"#)
        func counts() throws -> (rows: Int, locations: Int) {
            try s.withRead { t in
                var r = 0, l = 0
                try t.scan(s.tables.idxS, prefix: []) { _, _ in r += 1; return true }
                try t.scan(s.tables.idxlocS, prefix: []) { _, _ in l += 1; return true }
                return (r, l)
            }
        }
        let n = try s.get("/items").children.count
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/items", indexes: ["h", ".value"])])
        #expect(try counts() == (2 * n, 2))
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/items", indexes: ["h"])])
        #expect(try counts() == (n, 1))
        try Self.checkQueries(s, "one left")
        try await s.setIndexes(namespace: "t", [])
        #expect(try counts() == (0, 0))
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/items", indexes: ["h", ".value"])])
        try Self.checkQueries(s, "again")
        // Rules in the log: the definitions change with them.
        func rules(_ on: String) -> String {
            #"{"rules": {".read": true, ".write": true, "items": {".indexOn": [\#(on)]}, "u": {"$u": {"p": {".indexOn": ["t"]}}}}}"#
        }
        func apply(_ text: String) async throws {
            try await s.apply(entries: [LogEntry(index: s.appliedIndex + 1, term: 1, namespace: "t", operation: .setRules(text: text),
                                                 timestamp: 1, auth: .admin)])
        }
        try await apply(rules(#""h""#))
        #expect(try counts() == (n + 3, 3))
        try await apply(rules(""))
        #expect(try counts() == (3, 2))
        try await apply(rules(#""h", ".value""#))
        #expect(try counts() == (2 * n + 3, 4))
        try Self.checkQueries(s, "by rules")
        let (stored, rebuilt) = try await DerivedIndexTests.storedAndRebuilt(s)
        #expect(stored == rebuilt)
    }

    // MARK: - Format 3 directories

    /// Rewrites the closed directory's index as format 3 stored it (rows keyed by location key,
    /// every other value in the offset + exact form of the format before compact values, no
    /// `idxloc` tables) and marks it format 3.
    static func makeFormat3(_ dir: String) throws {
        let e = try openEnvironment(dir, mapSize: smallOptions().mapSize, flags: 0)
        defer { mdb_env_close(e) }
        var raw: OpaquePointer?
        try check(mdb_txn_begin(e, nil, 0, &raw))
        do {
            let t = Txn(ptr: raw!)
            let tables = try Tables.open(raw!, inlineObjects: true)
            var rows: [Tables.LogicalIndexRow] = []
            try tables.forEachLogicalRow(t) { rows.append($0) }
            try tables.dropAllIndexRows(t)
            try t.drop(tables.idxloc, delete: true)
            try t.drop(tables.idxlocx, delete: true)
            for (i, r) in rows.enumerated() { try t.put(tables.idxS, r.key, i % 2 == 0 ? r.compact : r.expanded) }
            var w = ByteWriter(capacity: 8)
            w.u64(3)
            try t.put(tables.meta, Array(Tables.storageFormatMetaKey.utf8), w.bytes)
            try check(mdb_txn_commit(raw))
        } catch {
            mdb_txn_abort(raw)
            throw error
        }
    }

    @Test func aFormat3DirectoryOpensWithItsIndexesRebuiltAndAnswersAlike() async throws {
        let dir = tempDir()
        var answers: [[String]] = []
        var logical: [DerivedIndexTests.Row] = []
        do {
            let s = try openStore(dir)
            try await s.set("/items", Self.items)
            try await s.set("/items/\(DerivedIndexTests.long)", #"{"h": 4}"#)  // a row in the overflow twin
            try await s.set("/u", #"{"a": {"p": {"x": {"h": 2}, "y": {"h": 1}}}, "b": {"p": {"z": {"h": 0}}}}"#)
            try await s.set("/o", #"{"k": {"h": 2}}"#, ns: "other")
            try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/items", indexes: ["h", ".value"]),
                                                    try IndexSpec(location: "/u/$id/p", indexes: ["h"])])
            try await s.setIndexes(namespace: "other", [try IndexSpec(location: "/o", indexes: ["h"])])
            answers = try Self.specs.map { try s.query(namespace: "t", path: p("/items"), spec: $0).map(\.key) }
            logical = try s.withRead { t in try DerivedIndexTests.rows(t, s.tables) }
            #expect(try s.withRead { t in try t.overflowRows(s.tables.idxx) } > 0)
            s.close()
        }
        try Self.makeFormat3(dir)
        #expect(try StorageFormatTests.mark(dir) == 3)
        let s = try openStore(dir)
        #expect(s.indexesRebuiltOnOpen)
        #expect(try Self.specs.map { try s.query(namespace: "t", path: p("/items"), spec: $0).map(\.key) } == answers)
        #expect(try s.withRead { t in try DerivedIndexTests.rows(t, s.tables) } == logical)
        #expect(try s.query(namespace: "other", path: p("/o"), spec: QuerySpec(index: .child(p("h")))).map(\.key) == ["k"])
        #expect(try s.query(namespace: "t", path: p("/u/a/p"), spec: QuerySpec(index: .child(p("h")))).map(\.key) == ["y", "x"])
        try await s.set("/items/g/h", "-7")
        try Self.checkQueries(s, "after migration")
        let (stored, rebuilt) = try await DerivedIndexTests.storedAndRebuilt(s, namespaces: ["t", "other"])
        #expect(stored == rebuilt)
        s.close()
        #expect(try StorageFormatTests.mark(dir) == UInt64(BuildInfo.storageFormat))
        let again = try openStore(dir)
        defer { again.close() }
        #expect(!again.indexesRebuiltOnOpen)
        try Self.checkQueries(again, "reopened")
    }
}

extension IndexValue {
    var isCutString: Bool {
        if case .string(let s) = self { var k: [UInt8] = []; return KeyCodec.appendIndexValue(.string(s), to: &k) }
        return false
    }
}

enum IndexQueryValue {
    static func of(_ child: Node, _ index: QueryIndex) -> IndexValue { index.indexValue(of: child) }
}
