import CLMDB
import EmberCore
import Foundation
import Testing
import EmberTestSupport
@testable import EmberStorage

/// Small objects stored as one tree record (`InlineObject`): every read answers as from the
/// per-leaf format, writes inside one keep the versions of that format, and a store writing inline
/// objects agrees in everything observable (values, versions, shallow keys, queries, index rows,
/// state hash) with one writing the format before, fed the same writes.
@Suite(.printsSeedOnFailure) struct InlineObjectTests {
    static let keys = ["a", "b", "1", "x"]

    func noInline() -> StoreOptions {
        var o = smallOptions()
        o.inlineObjects = false
        return o
    }

    /// Tree records by tag.
    static func tags(_ s: EmberStore) throws -> [UInt8: Int] {
        try s.withRead { t in
            var out: [UInt8: Int] = [:]
            try t.scan(s.tables.treeS, prefix: []) { _, v in out[v.first ?? 0, default: 0] += 1; return true }
            return out
        }
    }

    static func verRow(_ s: EmberStore, _ path: String) throws -> (sub: UInt64, at: UInt64)? {
        try s.withRead { t in
            guard try t.get(s.tables.verS, EncodedPath("t", p(path)).bytes) != nil else { return nil }
            return try s.tables.versionRecord(t, EncodedPath("t", p(path)).bytes)
        }
    }

    /// Random writes that mostly put small objects (of leaves, some with priorities) and then
    /// write inside, below and above them, delete parts of them and whole ones.
    static func randomOps(_ seed: UInt64, count: Int) -> [WriteOperation] {
        var g = TestSeed.generator(seed)
        func key() -> String { keys.randomElement(using: &g)! }
        func leaf() -> JSON {
            switch Int.random(in: 0..<7, using: &g) {
            case 0: return .int(Int64.random(in: -300...300, using: &g))
            case 1: return .int(Int64.random(in: .min ... .max, using: &g))
            case 2: return .double(Double(Int.random(in: -5...5, using: &g)) / 4)
            case 3: return .string(["", "s", "long string é😀"].randomElement(using: &g)!)
            case 4: return .bool(Bool.random(using: &g))
            case 5: return .object([".value": .int(Int64.random(in: 0...3, using: &g)), ".priority": .double(1.5)])
            default: return .object([".value": .string("v"), ".priority": .string("p")])
            }
        }
        func value(_ depth: Int) -> JSON {
            switch Int.random(in: 0..<10, using: &g) {
            case 0: return .null
            case 1, 2: return leaf()
            case 3 where depth < 3:
                // Nested: an object with a small object inside (inlined inside a larger write).
                var o: KeyMap<JSON> = [:]
                for _ in 0..<Int.random(in: 1...3, using: &g) { o[key()] = value(depth + 1) }
                return .object(o)
            default:
                var o: KeyMap<JSON> = [:]
                for _ in 0..<Int.random(in: 1...4, using: &g) { o[key()] = leaf() }
                if Int.random(in: 0..<4, using: &g) == 0 { o[".priority"] = Bool.random(using: &g) ? .int(3) : .string("p") }
                return .object(o)
            }
        }
        return (0..<count).map { _ in
            let path = (0..<Int.random(in: 1...3, using: &g)).map { _ in key() }
            if Int.random(in: 0..<4, using: &g) > 0 {
                return .set(path: Path(validated: path), value: value(path.count))
            }
            let base = Array(path.dropLast())
            var parts: [(Path, JSON)] = []
            var seen: Set<String> = []
            for _ in 0..<Int.random(in: 1...3, using: &g) {
                let k = key()
                if seen.insert(k).inserted { parts.append((Path(validated: [k]), value(base.count + 1))) }
            }
            return .update(path: Path(validated: base), values: parts)
        }
    }

    /// Every path up to depth 4 over the key alphabet.
    static var allPaths: [Path] {
        var out: [[String]] = [[]]
        var level: [[String]] = [[]]
        for _ in 0..<4 {
            level = level.flatMap { p in keys.map { p + [$0] } }
            out += level
        }
        return out.map { Path(validated: $0) }
    }

    /// Everything a client can observe, compared path by path.
    static func expectSame(_ a: EmberStore, _ b: EmberStore, _ note: String) throws {
        #expect(try a.stateHash() == b.stateHash(), "state hash \(note)")
        let specs: [QuerySpec] = [
            QuerySpec(index: .key, limit: 2, limitFromStart: false),
            QuerySpec(index: .child(p("a")), limit: 2, limitFromStart: false),
            QuerySpec(index: .value, start: QueryBound(value: .number(0), name: nil, inclusive: true)),
            QuerySpec(index: .priority),
        ]
        for path in allPaths {
            let ra = try a.read(namespace: "t", path: path), rb = try b.read(namespace: "t", path: path)
            #expect(ra.node == rb.node, "value of \(path) \(note)")
            #expect(ra.version == rb.version, "version of \(path) \(note)")
            #expect(try a.dataVersion(namespace: "t", path: path) == b.dataVersion(namespace: "t", path: path), "data version of \(path) \(note)")
            #expect(try a.exists(namespace: "t", path: path) == b.exists(namespace: "t", path: path), "exists \(path) \(note)")
            let ka = try a.shallowKeys(namespace: "t", path: path), kb = try b.shallowKeys(namespace: "t", path: path)
            #expect(ka == kb, "shallow keys of \(path) \(note)")
            #expect(ka == ra.node.sortedKeys, "shallow keys of \(path) against its value \(note)")
            if let first = ka.first {
                #expect(try a.shallowKeys(namespace: "t", path: path, after: first, limit: 2) == Array(ka.dropFirst().prefix(2)))
            }
            guard path.count <= 2 else { continue }
            for spec in specs {
                let qa = try a.query(namespace: "t", path: path, spec: spec)
                #expect(qa.map(\.key) == (try b.query(namespace: "t", path: path, spec: spec)).map(\.key), "query \(spec) at \(path) \(note)")
                #expect(qa.map(\.key) == spec.window(of: ra.node).map(\.key), "query \(spec) at \(path) against its value \(note)")
            }
            let rulesA = try a.withRulesData(namespace: "t") { d in (d.exists(at: path), d.hasChildren(at: path), d.shallow(at: path).leaf, d.shallow(at: path).priority) }
            #expect(rulesA.0 == !ra.node.isEmpty && rulesA.1 == ra.node.hasChildren && rulesA.2 == ra.node.leaf
                    && rulesA.3 == ra.node.priority, "rules data at \(path) \(note)")
        }
        let ia = try a.withRead { t in try DerivedIndexTests.rows(t, a.tables) }
        let ib = try b.withRead { t in try DerivedIndexTests.rows(t, b.tables) }
        #expect(ia == ib, "index rows \(note): \(DerivedIndexTests.firstDifference(ia, ib))")
    }

    static let indexes = [try! IndexSpec(location: "/$a", indexes: ["x", ".value"]), try! IndexSpec(location: "/a/$b", indexes: ["1"])]

    /// The same writes on a store with inline objects and one without, one commit each.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func inlineAndPerLeafStoresAgree(seed: UInt64) async throws {
        let a = try openStore(), b = try openStore(tempDir(), noInline())
        defer { a.close(); b.close() }
        for s in [a, b] { try await s.setIndexes(namespace: "t", Self.indexes) }
        var inlineSeen = 0
        for (i, op) in Self.randomOps(seed, count: 160).enumerated() {
            let ra = try await a.submit(namespace: "t", op), rb = try await b.submit(namespace: "t", op)
            #expect(ra.outcome == rb.outcome && ra.version == rb.version && ra.value == rb.value, "result of write \(i)")
            inlineSeen = max(inlineSeen, try Self.tags(a)[InlineObject.tag] ?? 0)
            if i % 20 == 19 { try Self.expectSame(a, b, "after write \(i)") }
        }
        try Self.expectSame(a, b, "at the end")
        #expect(inlineSeen > 3, "the writes made inline objects")
        #expect(try Self.tags(b)[InlineObject.tag] == nil)
        let (stored, rebuilt) = try await DerivedIndexTests.storedAndRebuilt(a)
        #expect(stored == rebuilt)
    }

    /// The same in one batch (flat apply, pending ancestor versions).
    @Test(arguments: [4, 5] as [UInt64])
    func inlineAndPerLeafStoresAgreeInABatch(seed: UInt64) async throws {
        let a = try openStore(), b = try openStore(tempDir(), noInline())
        defer { a.close(); b.close() }
        for s in [a, b] { try await s.setIndexes(namespace: "t", Self.indexes) }
        let entries = Self.randomOps(seed, count: 250).enumerated().map { i, op in
            LogEntry(index: UInt64(i + 1), term: 1, namespace: "t", operation: op, timestamp: 1_000, auth: .admin)
        }
        let ra = try await a.apply(entries: entries), rb = try await b.apply(entries: entries)
        #expect(a.metrics.nestedRetries == 0)
        for (x, y) in zip(ra, rb) { #expect(x.outcome == y.outcome && x.version == y.version) }
        try Self.expectSame(a, b, "after the batch")
    }

    /// A directory written in the per-leaf format (inline objects off: the format before) opens
    /// with them on, reads the same, and takes writes in and around its old records.
    @Test func aPerLeafDirectoryOpensAndTakesWrites() async throws {
        let dir = tempDir()
        let ops = Self.randomOps(9, count: 200)
        let b = try openStore(tempDir(), noInline())
        defer { b.close() }
        try await b.setIndexes(namespace: "t", Self.indexes)
        do {
            let old = try openStore(dir, noInline())
            try await old.setIndexes(namespace: "t", Self.indexes)
            for op in ops.prefix(100) { _ = try await old.submit(namespace: "t", op) }
            #expect(try Self.tags(old)[InlineObject.tag] == nil)
            old.close()
        }
        for op in ops.prefix(100) { _ = try await b.submit(namespace: "t", op) }
        let a = try openStore(dir)
        defer { a.close() }
        try Self.expectSame(a, b, "after reopening")
        for op in ops.suffix(100) {
            let ra = try await a.submit(namespace: "t", op), rb = try await b.submit(namespace: "t", op)
            #expect(ra.outcome == rb.outcome && ra.version == rb.version)
        }
        #expect(try (Self.tags(a)[InlineObject.tag] ?? 0) > 0)
        try Self.expectSame(a, b, "after writes on the reopened directory")
    }

    @Test func oneRecordPerSmallObjectAndVersionsKeptWhenWrittenInside() async throws {
        let s = try openStore()
        defer { s.close() }
        try await s.set("/items/c1", #"{"score": 1, "name": "n"}"#)                    // 1
        try await s.set("/items/c2", #"{"score": 2, "name": "m", ".priority": 7}"#)    // 2
        try await s.set("/other", "1")                                                 // 3
        // One record per object, no version row.
        #expect(try Self.tags(s) == [InlineObject.tag: 2, 3: 1])
        #expect(try Self.verRow(s, "/items/c1") == nil)
        #expect(try s.get("/items/c1") == n(#"{"score": 1, "name": "n"}"#))
        #expect(try s.get("/items/c2/score") == n("2") && s.get("/items/c2/nope") == .empty && s.get("/items/c2/score/x") == .empty)
        #expect(try s.get("/items/c2").priority == .number(7))
        #expect(try s.ver("/items/c1") == 1 && s.ver("/items/c1/score") == 1 && s.ver("/items/c1/score/x") == 1)
        #expect(try s.ver("/items") == 2 && s.ver("/items/c2/name") == 2 && s.ver("/") == 3)
        #expect(try s.dataVersion(namespace: "t", path: p("/items/c1/name")) == 1)
        #expect(try s.dataVersion(namespace: "t", path: p("/items/c1/nope")) == nil)

        // A write inside: the object is stored per leaf first, with its version row.
        let r = try await s.set("/items/c1/score", "5")                                // 4
        #expect(r.version == 4)
        #expect(try Self.tags(s) == [InlineObject.tag: 1, 1: 1, 3: 2])
        #expect(try Self.verRow(s, "/items/c1")! == (sub: 4, at: 1))
        #expect(try s.ver("/items/c1/name") == 1 && s.ver("/items/c1/score") == 4 && s.ver("/items/c1") == 4)
        #expect(try s.ver("/items/c2") == 2 && s.ver("/items") == 4)
        #expect(try s.get("/items/c1") == n(#"{"score": 5, "name": "n"}"#))

        // Below a leaf of an inline object: that leaf becomes an object, keeping its priority-less place.
        try await s.set("/items/c2/name/first", #""a""#)                                // 5
        #expect(try s.get("/items/c2") == n(#"{"score": 2, "name": {"first": "a"}, ".priority": 7}"#))
        #expect(try s.ver("/items/c2/score") == 2 && s.ver("/items/c2/name") == 5 && s.ver("/items/c2") == 5)
        #expect(try Self.verRow(s, "/items/c2")! == (sub: 5, at: 2))

        // A deletion inside, a new child beside, a conditional write on a child's version.
        try await s.set("/items/c3", #"{"a": true, "b": 0.5}"#)                        // 6
        try await s.set("/items/c3/a", "null")                                         // 7
        #expect(try s.get("/items/c3") == n(#"{"b": 0.5}"#))
        #expect(try s.ver("/items/c3/b") == 6 && s.ver("/items/c3/a") == 7 && s.ver("/items/c3") == 7)
        try await s.set("/items/c4", #"{"a": 1}"#)                                     // 8
        try await s.set("/items/c4/a", "null")                                         // 9: the last child: the object goes
        #expect(try s.get("/items/c4") == .empty && s.ver("/items/c4") == 9)
        #expect(try !s.shallowKeys(namespace: "t", path: p("/items")).contains("c4"))
        try await s.set("/items/c5", #"{"a": 1, "b": 2}"#)                             // 10
        let stale = try await s.set("/items/c5/a", "3", .ifVersion(9))                  // 11: refused
        #expect(stale.outcome == .conditionFailed(current: n("1"), version: 10))
        let ok = try await s.set("/items/c5/a", "3", .ifVersion(10))                    // 12
        #expect(ok.outcome == .applied(changed: true))
        #expect(try s.get("/items/c5") == n(#"{"a": 3, "b": 2}"#))
        // Writing the same object again changes nothing (and stays one record).
        try await s.set("/items/c6", #"{"a": 1}"#)                                     // 13
        let same = try await s.set("/items/c6", #"{"a": 1}"#)                           // 14
        #expect(same.outcome == .applied(changed: false))
        #expect(try s.ver("/items/c6") == 13)
    }

    @Test func shallowReadsAndLimits() async throws {
        let s = try openStore()
        defer { s.close() }
        try await s.set("/o", #"{"b": 1, "a": 2, "10": 3, "9": 4, "z": {".value": 1, ".priority": "p"}}"#)
        #expect(try Self.tags(s) == [InlineObject.tag: 1])
        #expect(try s.shallowKeys(namespace: "t", path: p("/o")) == ["9", "10", "a", "b", "z"])
        #expect(try s.shallowKeys(namespace: "t", path: p("/o"), after: "10", limit: 2) == ["a", "b"])
        #expect(try s.shallowKeys(namespace: "t", path: p("/o"), limit: 1) == ["9"])
        #expect(try s.childCount(namespace: "t", path: p("/o")) == 5)
        #expect(try s.shallowKeys(namespace: "t", path: p("/o/a")) == [])
        #expect(try s.exists(namespace: "t", path: p("/o/z")) && !s.exists(namespace: "t", path: p("/o/y")))
        #expect(try s.get("/o/z").priority == .string("p"))
        // Too many children, a nested object or a long key: per leaf.
        var big: KeyMap<JSON> = [:]
        for i in 0...InlineObject.maxChildren { big["k\(i)"] = .int(Int64(i)) }
        _ = try await s.submit(namespace: "t", .set(path: p("/big"), value: .object(big)))
        try await s.set("/nested", #"{"a": {"b": 1}}"#)
        try await s.set("/long", "{\"\(String(repeating: "x", count: 600))\": 1}")
        #expect(try Self.tags(s)[InlineObject.tag] == 2)  // /o and /nested/a (inside the larger write)
        #expect(try s.get("/big").children.count == InlineObject.maxChildren + 1)
    }

    @Test func indexQueriesOverInlineChildren() async throws {
        let s = try openStore()
        defer { s.close() }
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/items", indexes: ["score"])])
        var kids: [(String, String)] = []
        for i in 0..<60 { kids.append((String(format: "c%03d", i), #"{"score": \#((i * 37) % 60), "name": "n"}"#)) }
        try await s.update("/items", kids)
        #expect(try Self.tags(s)[InlineObject.tag] == 60)
        func top(_ n: Int) throws -> [String] {
            try s.query(namespace: "t", path: p("/items"), spec: QuerySpec(index: .child(p("score")), limit: n, limitFromStart: false)).map(\.key)
        }
        let model = try s.get("/items")
        #expect(try top(3) == QuerySpec(index: .child(p("score")), limit: 3, limitFromStart: false).window(of: model).map(\.key))
        let leader = try top(1)[0]
        // A write inside a child moves it in the index.
        try await s.set("/items/\(leader)/score", "-1")
        #expect(try !top(3).contains(leader))
        let first = try s.query(namespace: "t", path: p("/items"), spec: QuerySpec(index: .child(p("score")), limit: 1))
        #expect(first.map(\.key) == [leader] && first[0].node == n(#"{"score": -1, "name": "n"}"#))
        let (stored, rebuilt) = try await DerivedIndexTests.storedAndRebuilt(s)
        #expect(stored == rebuilt && stored.count == 60)
    }

    /// Snapshots carry the per-leaf form (what a follower of the format before installs) and
    /// install into either kind of store with equal state.
    @Test func snapshotsAreInThePerLeafForm() async throws {
        let leader = try openStore()
        defer { leader.close() }
        try await leader.setIndexes(namespace: "t", [try IndexSpec(location: "/items", indexes: ["score"])])
        try await leader.update("/items", [("a", #"{"score": 1, "name": "n"}"#), ("b", #"{"score": 2, ".priority": 1}"#)])
        try await leader.set("/items/c", #"{"x": {"score": 3}}"#)
        #expect(try Self.tags(leader)[InlineObject.tag] == 3)
        let recs = try DerivedIndexTests.records(leader)
        #expect(!recs.contains { $0.0 == 0 && $0.2.first == InlineObject.tag })
        #expect(recs.contains { $0.0 == 1 && $0.1 == EncodedPath("t", p("/items/a")).bytes })
        var chunks: [[UInt8]] = []
        try leader.snapshot(maxChunkBytes: 300) { chunks.append($0) }
        for options in [smallOptions(), noInline()] {
            let follower = try openStore(tempDir(), options)
            defer { follower.close() }
            try await follower.installSnapshot(chunks: chunks)
            try Self.expectSame(follower, leader, "installed snapshot")
            try await follower.apply(entries: [LogEntry(index: follower.appliedIndex + 1, term: 1, namespace: "t",
                                                        operation: .set(path: p("/items/a/score"), value: .int(9)), timestamp: 9, auth: .admin)])
            #expect(try follower.get("/items/a") == n(#"{"score": 9, "name": "n"}"#))
            #expect(try follower.ver("/items/a/name") == leader.ver("/items/a/name"))
        }
    }
}
