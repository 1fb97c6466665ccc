import CLMDB
import EmberCore
import EmberRules
import Foundation
import Testing
import EmberTestSupport
@testable import EmberStorage

/// Firebase's key and path limits, end to end in storage: keys of up to 768 UTF-8 bytes at any
/// of up to 32 levels are stored, read, queried, indexed and versioned in Firebase order; tree
/// keys longer than `SplitTable.inlineBytes` (480) live in the overflow tables. 33 levels or a
/// 769-byte key are refused with Firebase's errors and write nothing.
@Suite(.printsSeedOnFailure) struct KeyLengthLimitTests {
    /// 500 bytes shared by many long keys: all of them fall in one overflow group.
    static let shared = String(repeating: "m", count: 500)
    static let k768 = String(repeating: "k", count: 768)

    /// Keys around every boundary: short, at the inline limit, sharing a 500-byte prefix with
    /// each other and with short keys, 768 bytes (ASCII and 2-byte UTF-8), long integer-like keys
    /// (leading zeros keep a key in the integer group) and plain integers.
    static let pool: [String] = {
        var keys = ["a", "z", "m", "mm", "5", "-3", "0", "07", shared, shared + "a", shared + "b", shared + "ba",
                    shared + "0", shared + "~", String(repeating: "m", count: 499) + "n", k768,
                    String(repeating: "k", count: 767) + "l", String(repeating: "é", count: 384),
                    String(repeating: "0", count: 700) + "7", String(repeating: "0", count: 767) + "9"]
        for n in [468, 472, 474, 476, 478, 480, 482] { keys.append(String(repeating: "m", count: n)) }
        return keys
    }()

    func keys(_ r: [(key: String, node: Node)]) -> [String] { r.map(\.key) }

    func rows(_ s: EmberStore, _ dbi: MDB_dbi) throws -> Int {
        try s.withRead { t in
            var n = 0
            try t.scan(dbi, prefix: []) { _, _ in n += 1; return true }
            return n
        }
    }

    func overflowRows(_ s: EmberStore) throws -> [Int] {
        try [s.tables.treex, s.tables.verx, s.tables.idxx].map { try rows(s, $0) }
    }

    func path(_ segs: [String]) throws -> Path { try Path(segs.joined(separator: "/")) }

    @discardableResult
    func set(_ s: EmberStore, _ segs: [String], _ json: JSON) async throws -> WriteResult {
        try await s.submit(namespace: "t", .set(path: try path(segs), value: json, condition: nil))
    }

    func read(_ s: EmberStore, _ segs: [String]) throws -> Node { try s.read(namespace: "t", path: try path(segs)).node }

    // MARK: - Deep and long paths

    @Test func keysOf768BytesAtSeveralDepths() async throws {
        let s = try openStore()
        for depth in [1, 2, 5, 16, 31, 32] {
            let segs = (0..<(depth - 1)).map { "d\($0)" } + [Self.k768]
            #expect(try await set(s, segs, .int(Int64(depth))).isApplied)
            #expect(try read(s, segs) == Node(.int(Int64(depth))))
            #expect(try s.shallowKeys(namespace: "t", path: try path(Array(segs.dropLast()))).contains(Self.k768))
            #expect(try s.exists(namespace: "t", path: try path(segs)))
        }
        // The 768-byte leaf at depth 1 and the object holding the deeper ones, side by side.
        let root = try s.get("/")
        #expect(root.child(Self.k768) == Node(.int(1)))
        #expect(root.child(at: try path((0..<31).map { "d\($0)" } + [Self.k768])) == Node(.int(32)))
        #expect(try overflowRows(s)[0] > 0, "long tree keys are in the overflow table")
    }

    @Test func thirtyTwoLevelsOfLongKeys() async throws {
        let s = try openStore()
        let segs = (0..<32).map { i in String(repeating: Character(UnicodeScalar(UInt8(97 + i % 26))), count: 760) + "\(i)" }
        #expect(segs.allSatisfy { $0.utf8.count <= 768 })
        #expect(try await set(s, segs, .string("deep")).isApplied)
        #expect(try await set(s, Array(segs.prefix(31)) + ["short"], .bool(true)).isApplied)
        for d in 0...32 {
            let got = try read(s, Array(segs.prefix(d)))
            #expect(got.child(at: try path(Array(segs.dropFirst(d)))) == Node(.string("deep")), "depth \(d)")
        }
        #expect(try s.shallowKeys(namespace: "t", path: try path(Array(segs.prefix(31)))) == [segs[31], "short"])
        // A subtree delete removes every overflow descendant and leaves no rows behind.
        #expect(try await set(s, Array(segs.prefix(10)), .null).isApplied)
        #expect(try read(s, Array(segs.prefix(31))).isEmpty)
        #expect(try s.get("/").isEmpty)
        #expect(try overflowRows(s)[0] == 0)
        // Versions of the emptied ancestors stay until a write above them changes something.
        #expect(try rows(s, s.tables.verx) > 0)
        try await set(s, ["x"], .int(1))
        try await set(s, [], .null)
        #expect(try overflowRows(s) == [0, 0, 0])
    }

    @Test func versionsAndETagsOnALongPath() async throws {
        let s = try openStore()
        let base = [Self.k768, Self.shared, "x"]
        let leaf = base + [Self.k768]
        try await set(s, leaf, .int(1))                                              // 1
        try await set(s, base + ["other"], .int(2))                                  // 2
        let lp = try path(leaf), bp = try path(base)
        #expect(try s.version(namespace: "t", path: lp) == 1)
        #expect(try s.version(namespace: "t", path: bp) == 2)
        #expect(try s.version(namespace: "t", path: try path([Self.k768])) == 2)
        #expect(try s.dataVersion(namespace: "t", path: lp) == 1)
        #expect(try s.dataVersion(namespace: "t", path: try path(leaf + ["nope"])) == nil)
        // Conditional writes compare against the long path's own version.
        let stale = try await s.submit(namespace: "t", .set(path: lp, value: .int(9), condition: .ifDataVersion(2)))
        #expect(stale.outcome == .conditionFailed(current: Node(.int(1)), version: 1))
        let ok = try await s.submit(namespace: "t", .set(path: lp, value: .int(9), condition: .ifDataVersion(1)))
        #expect(ok.isApplied && ok.version == 4)
        // An ancestor write dominates the versions below it (their overflow rows are dropped;
        // the ancestor's own, 772 bytes long, is the one left). Before it: rows of the three
        // long ancestors; the two leaves keep their versions in their tree records.
        #expect(try rows(s, s.tables.verx) == 3)
        try await set(s, [Self.k768], .object(["y": .int(0)]))                     // 5
        #expect(try s.version(namespace: "t", path: lp) == 5)
        #expect(try rows(s, s.tables.verx) == 1)
    }

    @Test func leafAncestorsOnLongPathsBecomeObjects() async throws {
        let s = try openStore()
        let a = [Self.k768, Self.k768]
        _ = try await s.submit(namespace: "t", .set(path: try path(a), value: .object([".value": .int(1), ".priority": .int(5)]), condition: nil))
        try await set(s, a + ["b", Self.shared], .int(2))
        #expect(try read(s, a) == Node(children: ["b": Node(children: [Self.shared: Node(.int(2))])], priority: .number(5)))
        // Deleting under a leaf changes nothing; deleting the last child prunes the parents.
        try await set(s, a + ["b", Self.shared], .null)
        #expect(try s.get("/").isEmpty)
    }

    // MARK: - Order

    @Test func siblingsSharingALongPrefixKeepFirebaseOrder() async throws {
        let s = try openStore()
        var value: KeyMap<JSON> = [:]
        for (i, k) in Self.pool.enumerated() {
            value[k] = .object(["h": i % 3 == 0 ? .string("s\(i % 5)") : .int(Int64((i * 7) % 11)), ".priority": .int(Int64(i % 4))])
        }
        let base = ["p", Self.shared]
        try await set(s, base, .object(value))
        let model = try Node(json: .object(value))
        let bp = try path(base)
        #expect(try read(s, base) == model)
        #expect(try s.shallowKeys(namespace: "t", path: bp) == model.sortedKeys)
        #expect(try s.shallowKeys(namespace: "t", path: bp, limit: 5) == Array(model.sortedKeys.prefix(5)))
        // Shallow reads and queries of the parent of `base` see one child.
        #expect(try s.shallowKeys(namespace: "t", path: try path(["p"])) == [Self.shared])
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/p/$x", indexes: ["h", ".value"])])
        for spec in specs(model) {
            let got = try s.query(namespace: "t", path: bp, spec: spec)
            let want = spec.window(of: model)
            #expect(keys(got) == keys(want), "\(spec)")
            #expect(got.map(\.node) == want.map(\.node), "\(spec)")
        }
    }

    /// Key, child, value and priority queries with limits from both ends and ranges whose bounds
    /// are long keys (including keys between stored ones).
    func specs(_ model: Node) -> [QuerySpec] {
        let sorted = model.sortedKeys
        var out: [QuerySpec] = []
        let bounds = [sorted[sorted.count / 2], sorted[sorted.count / 3], Self.shared + "aa", String(repeating: "m", count: 479), "b"]
        for index in [QueryIndex.key, .child(try! Path("h")), .value, .priority] {
            let q = QuerySpec(index: index)
            out += [q, q.limited(toFirst: 3), q.limited(toLast: 4), q.limited(toFirst: 100)]
            for b in bounds {
                let v: IndexValue = index == .key ? .string(b) : (index == .priority ? .number(1) : .number(3))
                out += [q.starting(at: v, key: index == .key ? nil : b).limited(toFirst: 4),
                        q.ending(at: v, key: index == .key ? nil : b).limited(toLast: 3),
                        q.starting(after: v, key: index == .key ? nil : b),
                        q.ending(before: v, key: index == .key ? nil : b),
                        q.starting(at: v, key: index == .key ? nil : b).ending(at: index == .key ? .string(sorted.last!) : .number(20))]
            }
        }
        return out
    }

    /// Random writes, updates and deletes over the long-key pool, checked against the pure model
    /// after every step: whole tree, shallow keys and queries (indexed and not).
    @Test func randomWritesMatchTheModel() async throws {
        let s = try openStore()
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/$a", indexes: [".value", Self.shared]),
                                                try IndexSpec(location: "/$a/$b", indexes: ["h"])])
        var g = TestSeed.generator(7)
        var model = Node.empty
        func pick() -> String { Self.pool.randomElement(using: &g)! }
        func randomPath() -> [String] { (0..<Int.random(in: 1...3, using: &g)).map { _ in pick() } }
        func randomValue(_ depth: Int) -> JSON {
            switch Int.random(in: 0..<6, using: &g) {
            case 0: return .null
            case 1, 2: return .int(Int64.random(in: -3...3, using: &g))
            case 3: return .string(["x", "y", Self.shared][Int.random(in: 0..<3, using: &g)])
            default:
                guard depth < 2 else { return .bool(true) }
                var o: KeyMap<JSON> = [:]
                for _ in 0..<Int.random(in: 1...4, using: &g) { o[pick()] = randomValue(depth + 1) }
                if Bool.random(using: &g) { o["h"] = .int(Int64.random(in: 0...4, using: &g)) }
                return .object(o)
            }
        }
        for step in 0..<60 {
            let segs = randomPath()
            if step % 5 == 4 {
                let parts = [(try path([pick()]), randomValue(1)), (try path([pick(), pick()]), randomValue(1))]
                let distinct = parts[0].0 != parts[1].0 && !parts[0].0.contains(parts[1].0) && !parts[1].0.contains(parts[0].0)
                guard distinct else { continue }
                _ = try await s.submit(namespace: "t", .update(path: try path(segs), values: parts, condition: nil))
                model = model.updating(parts.map { (try! path(segs).appending($0.0), try! Node(json: $0.1)) })
            } else {
                let v = randomValue(0)
                try await set(s, segs, v)
                model.set(try Node(json: v), at: try path(segs))
            }
            #expect(try s.get("/") == model, "step \(step)")
            let at = Array(segs.prefix(Int.random(in: 0...1, using: &g)))
            let here = model.child(at: try path(at))
            #expect(try s.shallowKeys(namespace: "t", path: try path(at)) == here.sortedKeys, "step \(step)")
            if here.children.count > 1 {
                let sub = at.count == 1 ? [QuerySpec(index: .value), QuerySpec(index: .child(try Path(Self.shared)))] : []
                for spec in specs(here).filter({ _ in Int.random(in: 0..<16, using: &g) == 0 }) + sub {
                    let got = try s.query(namespace: "t", path: try path(at), spec: spec)
                    #expect(keys(got) == keys(spec.window(of: here)), "step \(step) \(spec)")
                }
            }
            for k in here.children.keys where at.count == 1 {
                let spec = QuerySpec(index: .child(try Path("h"))).limited(toLast: 2)
                let got = try s.query(namespace: "t", path: try path(at + [k]), spec: spec)
                #expect(keys(got) == keys(spec.window(of: here.child(k))), "step \(step)")
            }
        }
        #expect(try overflowRows(s).allSatisfy { $0 > 0 }, "every overflow table was exercised")
        try await set(s, [], .null)
        #expect(try overflowRows(s) == [0, 0, 0])
    }

    // MARK: - Indexes

    @Test func indexOnWithLongChildKeysAndLongLocations() async throws {
        let s = try openStore()
        let loc = [Self.k768, Self.shared]
        var kids: KeyMap<JSON> = [:]
        for (i, k) in Self.pool.enumerated() { kids[k] = .object(["score": .int(Int64(i % 6)), Self.k768: .string("v\(i % 4)")]) }
        try await set(s, loc, .object(kids))
        // Built from existing data, then maintained.
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/$a/$b", indexes: ["score", Self.k768])])
        let byScore = QuerySpec(index: .child(try Path("score")))
        let byLong = QuerySpec(index: .child(try Path(Self.k768)))
        #expect(try s.hasIndex(namespace: "t", path: try path(loc), index: byScore.index))
        func check(_ note: String) throws {
            let model = try read(s, loc)
            for spec in [byScore, byScore.limited(toFirst: 3), byScore.limited(toLast: 3), byScore.equal(to: .number(2)),
                         byLong.starting(at: .string("v1")).limited(toFirst: 5), byLong.limited(toLast: 2)] {
                let got = try s.query(namespace: "t", path: try path(loc), spec: spec)
                #expect(keys(got) == keys(spec.window(of: model)), "\(note) \(spec)")
                #expect(got.map(\.node) == spec.window(of: model).map(\.node), "\(note) \(spec)")
            }
        }
        try check("built")
        try await set(s, loc + [Self.k768, "score"], .int(-1))
        try await set(s, loc + [Self.shared + "b"], .null)
        try await set(s, loc + [Self.shared + "new"], .object(["score": .int(100)]))
        try check("maintained")
        #expect(keys(try s.query(namespace: "t", path: try path(loc), spec: byScore.limited(toFirst: 1))) == [Self.k768])
        #expect(keys(try s.query(namespace: "t", path: try path(loc), spec: byScore.limited(toLast: 1))) == [Self.shared + "new"])
        #expect(try rows(s, s.tables.idxx) > 0)
        try await s.setIndexes(namespace: "t", [])
        #expect(try rows(s, s.tables.idxx) == 0)
    }

    // MARK: - Durability, snapshots, backups, hashes

    func fill(_ s: EmberStore) async throws {
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/$a", indexes: [".value"])])
        for (i, k) in Self.pool.enumerated() {
            try await set(s, [Self.k768, k], .int(Int64(i)))
            try await set(s, [Self.shared, k, Self.k768], .string("s\(i)"))
        }
    }

    @Test func dataSurvivesRestartAndSnapshotsAndBackupsCarryOverflowRows() async throws {
        let dir = tempDir()
        var s: EmberStore? = try openStore(dir)
        try await fill(s!)
        let tree = try s!.get("/")
        let hash = try s!.stateHash()
        let rowsBefore = try overflowRows(s!)
        #expect(rowsBefore.allSatisfy { $0 > 0 })
        s!.close()
        s = nil
        let r = try openStore(dir)
        #expect(try r.get("/") == tree)
        #expect(try r.stateHash() == hash)
        #expect(try r.version(namespace: "t", path: try path([Self.shared, Self.k768, Self.k768])) > 0)

        // Snapshot → another store.
        var chunks: [[UInt8]] = []
        try r.snapshot(maxChunkBytes: 4096) { chunks.append($0) }
        let b = try openStore()
        try await set(b, [Self.k768, "stale"], .int(1))
        try await b.installSnapshot(chunks: chunks)
        #expect(try b.get("/") == tree)
        #expect(try b.stateHash() == hash)
        #expect(try overflowRows(b) == rowsBefore)
        let q = QuerySpec(index: .value).limited(toLast: 3)
        #expect(keys(try b.query(namespace: "t", path: try path([Self.k768]), spec: q))
                == keys(q.window(of: tree.child(Self.k768))))

        // Backup file → another store.
        let file = tempDir() + "/b.bak"
        try r.writeBackup(to: file)
        let c = try openStore()
        try await c.restoreBackup(from: file)
        #expect(try c.get("/") == tree)
        #expect(try c.stateHash() == hash)
        #expect(try c.stateHash(namespace: "t") == r.stateHash(namespace: "t"))
    }

    @Test func stateHashDependsOnDataNotOnHistory() async throws {
        let a = try openStore(), b = try openStore()
        try await fill(a)
        // Same data written in one go (different log, different overflow write order).
        _ = try await b.submit(namespace: "t", .set(path: .root, value: try a.get("/").toJSON(), condition: nil))
        #expect(try a.stateHash() == b.stateHash())
        try await set(b, [Self.shared, Self.k768, Self.k768], .string("changed"))
        #expect(try a.stateHash() != b.stateHash())
    }

    /// A data directory written before the overflow tables existed (six tables) still opens:
    /// the new tables are created on first open and the old data is read as before.
    @Test func olderDataDirectoryOpens() async throws {
        let dir = tempDir()
        do {
            let s = try openStore(dir)
            try await s.set("/a/b", "1")
            s.close()
        }
        // Drop the overflow tables, as a directory from before them has none.
        var env: OpaquePointer?
        try check(mdb_env_create(&env))
        try check(mdb_env_set_maxdbs(env, 8))
        try check(mdb_env_set_mapsize(env, 1 << 30))
        try check(mdb_env_open(env, dir, 0, 0o644))
        var t: OpaquePointer?
        try check(mdb_txn_begin(env, nil, 0, &t))
        for name in ["treex", "verx", "idxx"] {
            var dbi: MDB_dbi = 0
            try check(mdb_dbi_open(t, name, 0, &dbi))
            try check(mdb_drop(t, dbi, 1))
        }
        try check(mdb_txn_commit(t))
        mdb_env_close(env)

        let s = try openStore(dir)
        #expect(try s.get("/a/b") == n("1"))
        #expect(try await set(s, ["a", Self.k768], .int(2)).isApplied)
        #expect(try s.get("/a") == Node(children: ["b": n("1"), Self.k768: n("2")]))
    }

    // MARK: - Firebase's limits still hold

    @Test func thirtyThreeLevelsOrA769ByteKeyAreRefusedAndWriteNothing() async throws {
        let s = try openStore()
        #expect(throws: EmberError.pathTooDeep(depth: 33)) { try Path((0..<33).map { "k\($0)" }.joined(separator: "/")) }
        #expect(throws: EmberError.keyTooLong(bytes: 769)) { try Path(Self.k768 + "x") }
        let deep31 = try path((0..<31).map { _ in Self.k768 })
        await #expect(throws: StorageError.invalid(.pathTooDeep(depth: 33))) {
            try await s.submit(namespace: "t", .set(path: deep31, value: .object(["a": .object(["b": .int(1)])]), condition: nil))
        }
        await #expect(throws: StorageError.invalid(.keyTooLong(bytes: 769))) {
            try await s.submit(namespace: "t", .set(path: deep31, value: .object([Self.k768 + "x": .int(1)]), condition: nil))
        }
        await #expect(throws: StorageError.invalid(.keyTooLong(bytes: 769))) {
            try await s.submit(namespace: "t", .update(path: .root, values: [(try path(["ok"]), .int(1)),
                                                                            (try path(["x"]), .object([Self.k768 + "x": .int(1)]))], condition: nil))
        }
        #expect(s.lastLogIndex == 0)
        #expect(try s.get("/").isEmpty)
        // Exactly at the limits: 32 levels of 768-byte keys.
        #expect(try await s.submit(namespace: "t", .set(path: deep31, value: .object([Self.k768: .int(1)]), condition: nil)).isApplied)
        #expect(try s.read(namespace: "t", path: deep31.child(Self.k768)).node == Node(.int(1)))
    }

    @Test func rulesReadLongPaths() async throws {
        let s = try openStore()
        let segs = [Self.k768, Self.shared, Self.k768]
        try await set(s, segs, .object(["c": .int(1), ".priority": .string("p")]))
        let at = try path(segs), leaf = try path(segs + ["c"]), parent = try path(Array(segs.prefix(2)))
        let absent = try path(segs + ["nope"])
        try s.withRulesData(namespace: "t") { d in
            #expect(d.exists(at: at))
            #expect(d.hasChildren(at: at))
            #expect(d.hasChildren(at: leaf) == false)
            #expect(d.shallow(at: at).priority == .string("p"))
            #expect(d.shallow(at: leaf).leaf == .int(1))
            #expect(d.node(at: parent).child(Self.k768).child("c") == Node(.int(1)))
            #expect(d.exists(at: absent) == false)
        }
    }
}
