import CLMDB
import EmberCore
import Foundation
import Testing
import EmberTestSupport
@testable import EmberStorage

/// Indexes without a reverse table: a write finds a child's stale index row from the child's
/// value before the write. The index must stay exactly what a rebuild from the tree gives, under
/// every kind of write; data directories and snapshots of the format with the reverse table
/// (`idxrev`) still work.
@Suite(.printsSeedOnFailure) struct DerivedIndexTests {
    struct Row: Sendable, Equatable, CustomStringConvertible {
        var key: [UInt8]
        var value: [UInt8]
        var description: String { "\(key.count)-byte key ...\(key.suffix(12)) -> \(value)" }
    }

    /// The first row where two index tables differ, for a short failure message.
    static func firstDifference(_ a: [Row], _ b: [Row]) -> String {
        for (x, y) in zip(a, b) where x != y { return "\(x) vs \(y)" }
        return "\(a.count) rows vs \(b.count)"
    }

    /// The index rows by logical key (location key + value + child, as format 3 stored them:
    /// location ids are local, `IndexLocations`). Throws when a stored row has no location or a
    /// location no row: every row must be reachable, and no id outlive its last row.
    static func rows(_ t: Txn, _ tables: Tables) throws -> [Row] {
        var out: [Row] = []
        try tables.forEachLogicalRow(t) { out.append(Row(key: $0.key, value: $0.compact)) }
        var stored = 0
        try t.scan(tables.idxS, prefix: []) { _, _ in stored += 1; return true }
        var emptyLocations = 0
        try t.scan(tables.idxlocS, prefix: []) { _, id in
            if try !t.hasPrefix(tables.idxS, id) { emptyLocations += 1 }
            return true
        }
        if stored != out.count || emptyLocations > 0 {
            throw StorageError.corrupt("\(stored) stored index rows, \(out.count) under a location; \(emptyLocations) locations without rows")
        }
        return out
    }

    /// The index rows as stored, and as a rebuild from the tree gives them (in a transaction that
    /// is thrown away).
    static func storedAndRebuilt(_ s: EmberStore, namespaces: [String] = ["t"]) async throws -> (stored: [Row], rebuilt: [Row]) {
        let stored = try s.withRead { t in try DerivedIndexTests.rows(t, s.tables) }
        let rebuilt = try await s.perform { w in
            var raw: OpaquePointer?
            try check(mdb_txn_begin(w.store.env, nil, 0, &raw))
            defer { mdb_txn_abort(raw) }
            let t = Txn(ptr: raw!)
            try w.tables.dropAllIndexRows(t)
            let ap = Applier(tables: w.tables, txn: t)
            for ns in namespaces {
                for d in try w.tables.indexDefs(t, ns) { try ap.build(ns: ns, def: d) }
            }
            return try DerivedIndexTests.rows(t, w.tables)
        }
        return (stored, rebuilt)
    }

    static let long = String(repeating: "L", count: 600)  // a child whose index keys overflow (`idxx`)

    static func rules(_ indexes: [String]) -> String {
        let list = indexes.map { "\"\($0)\"" }.joined(separator: ", ")
        return #"{"rules": {".read": true, ".write": true, "items": {".indexOn": [\#(list)]}, "#
            + #""users": {"$u": {"posts": {".indexOn": ["t"]}}}}}"#
    }

    /// Random writes in random batches (flat commits; a rejected entry in a batch forces the
    /// nested redo), rules changes adding and removing an index: after every batch the index
    /// equals the rebuilt one, and queries answer as the data says.
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func indexEqualsRebuildAfterRandomWrites(seed: UInt64) async throws {
        var g = TestSeed.generator(seed)
        let s = try openStore()
        let children = ["a", "b", "c", "1", "2", "-3", Self.long]
        func child() -> String { children.randomElement(using: &g)! }
        func value() -> JSON {
            switch Int.random(in: 0..<8, using: &g) {
            case 0: return .null
            case 1: return .bool(Bool.random(using: &g))
            case 2: return .double(Double(Int.random(in: -8...8, using: &g)) / 4)
            case 3: return .string(["x", "y", String(repeating: "s", count: 70) + "z"].randomElement(using: &g)!)
            case 4: return .object(["q": .int(1)])
            default: return .int(Int64.random(in: -3...3, using: &g))
            }
        }
        func item() -> JSON {
            switch Int.random(in: 0..<6, using: &g) {
            case 0: return value()  // a leaf child (writes below it turn it into an object)
            case 1: return .object(["d": .object(["h": value()]), "z": .int(1)])
            default: return .object(["h": value(), "n": .string("n")])
            }
        }
        func operation() -> WriteOperation {
            let c = child()
            switch Int.random(in: 0..<12, using: &g) {
            case 0, 1: return .set(path: p("/items/\(c)"), value: item())
            case 2, 3: return .set(path: p("/items/\(c)/h"), value: value())
            case 4: return .set(path: p("/items/\(c)/d/h"), value: value())
            case 5: return .set(path: p("/items/\(c)"), value: .null)
            case 6:
                // The same child twice (siblings below it), and another child.
                var c2 = child()
                while c2 == c { c2 = child() }
                return .update(path: p("/items"), values: [(p("\(c)/h"), value()), (p("\(c)/d/h"), value()), (p(c2), item())])
            case 7:
                return .update(path: p("/"), values: [(p("items/\(c)/h"), value()), (p("items/\(c)/n"), .null),
                                                      (p("users/u\(Int.random(in: 0..<3, using: &g))/posts/p\(c.count)/t"), value())])
            case 8:
                // An ancestor overwritten: every entry below it re-derived.
                var o: KeyMap<JSON> = [:]
                for _ in 0..<Int.random(in: 0...3, using: &g) { o[child()] = item() }
                return .set(path: p("/items"), value: Bool.random(using: &g) ? .object(o) : value())
            case 9:
                return .set(path: p("/users/u\(Int.random(in: 0..<3, using: &g))/posts/\(c == Self.long ? "p" : c)"),
                            value: .object(["t": value()]))
            case 10:
                return Int.random(in: 0..<3, using: &g) == 0 ? .set(path: p("/"), value: .null)
                    : .set(path: p("/users/u\(Int.random(in: 0..<3, using: &g))"), value: .null)
            default:
                return .set(path: p("/items/\(c)/n"), value: value())
            }
        }
        var index: UInt64 = 0
        func entry(_ op: WriteOperation, _ auth: WriteAuth = .admin) -> LogEntry {
            index += 1
            return LogEntry(index: index, term: 1, namespace: "t", operation: op, timestamp: 1_000 + Int64(index), auth: auth)
        }
        try await s.apply(entries: [entry(.setRules(text: Self.rules(["h", ".value"])))])
        var nested = 0
        for round in 0..<40 {
            var ops: [(WriteOperation, WriteAuth)] = []
            for _ in 0..<Int.random(in: 1...8, using: &g) { ops.append((operation(), .admin)) }
            if round % 7 == 3 {
                // Only an admin may change rules: this entry throws at apply time, so the batch is
                // redone with a nested transaction per entry.
                ops.insert((.setRules(text: Self.rules([])), .user(nil)), at: ops.count / 2)
                nested += 1
            }
            if round % 9 == 5 {
                let which = [["h", ".value"], ["h", "d/h"], [".value"], []][(round / 9) % 4]
                ops.append((.setRules(text: Self.rules(which)), .admin))
            }
            let batch = ops.map { entry($0.0, $0.1) }
            let results = try await s.apply(entries: batch)
            #expect(results.count == batch.count)
            let (stored, rebuilt) = try await Self.storedAndRebuilt(s)
            let same = stored == rebuilt
            #expect(same, "seed \(seed) round \(round): \(Self.firstDifference(stored, rebuilt))")
            if !same { return }
            let model = try s.get("/items")
            for idx in try s.indexSpecs(namespace: "t").first(where: { $0.location == "/items" })?.indexes ?? [] {
                for spec in [QuerySpec(index: idx), QuerySpec(index: idx).limited(toLast: 2)] {
                    let got = try s.query(namespace: "t", path: p("/items"), spec: spec)
                    #expect(got.map(\.key) == spec.window(of: model).map(\.key), "\(spec) round \(round)")
                }
            }
        }
        #expect(s.metrics.nestedRetries == UInt64(nested))
    }

    /// setIndexes (the `--rules` file's indexes) builds and drops from the tree: the same rows.
    @Test func setIndexesBuildsWhatMaintenanceKeeps() async throws {
        let s = try openStore()
        try await s.set("/items", #"{"a": {"h": 3}, "b": {"h": "x"}, "c": 5, "\#(Self.long)": {"h": 1}}"#)
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/items", indexes: ["h", ".value"])])
        try await s.set("/items/a/h", "4")
        try await s.update("/items", [("b/h", "null"), ("b/k", "1"), ("\(Self.long)/h", "-2")])
        var (stored, rebuilt) = try await Self.storedAndRebuilt(s)
        #expect(stored == rebuilt && stored.count == 8)
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/items", indexes: ["h"])])
        (stored, rebuilt) = try await Self.storedAndRebuilt(s)
        #expect(stored == rebuilt && stored.count == 4)
        try await s.setIndexes(namespace: "t", [])
        (stored, _) = try await Self.storedAndRebuilt(s)
        #expect(stored.isEmpty)
    }

    // MARK: - The format with a reverse table

    /// The reverse-table rows the format before kept for `s`'s index on /items (as its
    /// `putEntry` wrote them: location prefix + child segment → the child's index key), by
    /// logical key, computed from the data.
    static func legacyReverseRows(_ s: EmberStore, indexes: [String]) throws -> [[UInt8]: [UInt8]] {
        let model = try s.get("/items")
        var out: [[UInt8]: [UInt8]] = [:]
        for d in try IndexSpec(location: "/items", indexes: indexes).defs {
            let locPrefix = KeyCodec.namespacePrefix("t") + d.id + KeyCodec.encode(p("/items"))
            for (k, c) in model.children {
                let row = Applier.indexRow(ns: "t", def: d, location: p("/items"), childKey: k, value: d.index.indexValue(of: c))
                out[locPrefix + KeyCodec.segment(k)] = row.key
            }
        }
        return out
    }

    /// A data directory written with the reverse table opens: the table is dropped, the index
    /// answers and is maintained as a rebuild gives it.
    @Test func aDirectoryWithTheReverseTableOpensAndDropsIt() async throws {
        let dir = tempDir()
        do {
            let s = try openStore(dir)
            try await s.set("/items", #"{"a": {"h": 3}, "b": {"h": 1}, "c": 5, "\#(Self.long)": {"h": 2}}"#)
            try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/items", indexes: ["h"])])
            // What the format before also wrote: its reverse table, long keys in its overflow twin.
            let legacy = try Self.legacyReverseRows(s, indexes: ["h"])
            #expect(legacy.keys.contains { $0.count > SplitTable.inlineBytes })
            try await s.perform { w in
                try w.writeTxn { t in
                    var rev: MDB_dbi = 0, revx: MDB_dbi = 0
                    try check(mdb_dbi_open(t.ptr, "idxrev", flag(MDB_CREATE), &rev))
                    try check(mdb_dbi_open(t.ptr, "idxrevx", flag(MDB_CREATE), &revx))
                    let table = SplitTable(main: rev, over: revx, used: OverflowUse(true))
                    for (k, v) in legacy { try t.put(table, k, v) }
                }
            }
            s.close()
        }
        func tableExists(_ name: String) throws -> Bool {
            var env: OpaquePointer?
            try check(mdb_env_create(&env))
            defer { mdb_env_close(env) }
            try check(mdb_env_set_maxdbs(env, 16))
            try check(mdb_env_open(env, dir, flag(MDB_RDONLY), 0o644))
            var t: OpaquePointer?
            try check(mdb_txn_begin(env, nil, flag(MDB_RDONLY), &t))
            defer { mdb_txn_abort(t) }
            var dbi: MDB_dbi = 0
            return mdb_dbi_open(t, name, 0, &dbi) == 0
        }
        #expect(try tableExists("idxrev") && tableExists("idxrevx"))
        let s = try openStore(dir)
        let byH = QuerySpec(index: .child(p("h")))
        #expect(try s.query(namespace: "t", path: p("/items"), spec: byH).map(\.key) == ["c", "b", Self.long, "a"])
        try await s.set("/items/a/h", "0")
        try await s.set("/items/\(Self.long)", "null")
        #expect(try s.query(namespace: "t", path: p("/items"), spec: byH).map(\.key) == ["c", "a", "b"])
        let (stored, rebuilt) = try await Self.storedAndRebuilt(s)
        #expect(stored == rebuilt && stored.count == 3)
        #expect(try s.footprint().tables.map(\.name) == ["tree", "versions", "index", "log", "meta"])
        s.close()
        #expect(try !tableExists("idxrev") && !tableExists("idxrevx"))
    }

    /// Snapshot records by table tag (header, tables 0–9).
    static func records(_ s: EmberStore) throws -> [(UInt8, [UInt8], [UInt8])] {
        var chunks: [[UInt8]] = []
        try s.snapshot(maxChunkBytes: 512) { chunks.append($0) }
        return try snapshotRecords(chunks)
    }

    /// A snapshot from this version carries the reverse-table rows a follower of the format
    /// before needs (tags 3 and 9, exactly what that format held); this version installs a
    /// snapshot with them (from a leader of that format) and ignores them.
    @Test func snapshotsCarryTheReverseRowsBothWays() async throws {
        let leader = try openStore()
        try await leader.set("/items", #"{"a": {"h": 3}, "b": {"h": "x"}, "c": 5, "\#(Self.long)": {"h": 2}}"#)
        try await leader.setIndexes(namespace: "t", [try IndexSpec(location: "/items", indexes: ["h", ".value"])])
        try await leader.set("/items/b/h", "1")
        let recs = try Self.records(leader)
        var reverse: [[UInt8]: [UInt8]] = [:]
        for (tag, k, v) in recs where tag == 3 || tag == 9 {
            if tag == 3 {
                #expect(k.count <= SplitTable.inlineBytes)
                reverse[k] = v
            } else {
                let (full, value) = try SplitTable.decodeRow(v)
                #expect(k == SplitTable.overflowKey(full))
                reverse[full] = value
            }
        }
        #expect(recs.contains { $0.0 == 9 } && recs.contains { $0.0 == 3 })
        #expect(reverse == (try Self.legacyReverseRows(leader, indexes: ["h", ".value"])))

        var chunks: [[UInt8]] = []
        try leader.snapshot(maxChunkBytes: 700) { chunks.append($0) }
        let follower = try openStore()
        try await follower.installSnapshot(chunks: chunks)
        #expect(try follower.stateHash() == leader.stateHash())
        let (stored, rebuilt) = try await Self.storedAndRebuilt(follower)
        let leaderRows = try await Self.storedAndRebuilt(leader).stored
        #expect(stored == rebuilt && stored == leaderRows)
        try await follower.apply(entries: [LogEntry(index: follower.appliedIndex + 1, term: 1, namespace: "t",
                                                    operation: .set(path: p("/items/a/h"), value: .int(-5)), timestamp: 9, auth: .admin)])
        let after = try await Self.storedAndRebuilt(follower)
        #expect(after.stored == after.rebuilt)
        #expect(try follower.query(namespace: "t", path: p("/items"), spec: QuerySpec(index: .child(p("h")))).map(\.key)
                == ["c", "a", "b", Self.long, ])
    }
}
