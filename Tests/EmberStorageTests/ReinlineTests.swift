import CLMDB
import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// Objects stored per leaf (a directory of the former layout, a snapshot stream) rewritten as
/// inline records (`Reinline`): on open, when a snapshot is installed and by `compact`, with
/// everything observable unchanged, and only where a write would have made the same record.
@Suite struct ReinlineTests {
    func noInline() -> StoreOptions {
        var o = smallOptions()
        o.inlineObjects = false
        return o
    }

    /// Paths (as "/a/b") of the inline records.
    static func inlinePaths(_ s: EmberStore) throws -> [String] {
        try s.withRead { t in
            var out: [String] = []
            try t.scan(s.tables.treeS, prefix: KeyCodec.namespacePrefix("t")) { k, v in
                if v.first == InlineObject.tag {
                    let segs = KeyCodec.decodeSegments(k, from: KeyCodec.namespacePrefix("t").count) ?? ["?"]
                    out.append("/" + segs.joined(separator: "/"))
                }
                return true
            }
            return out
        }
    }

    /// A per-leaf directory with `ops` applied, closed; returns its path.
    func perLeafDirectory(_ ops: [WriteOperation]) async throws -> String {
        let dir = tempDir()
        let old = try openStore(dir, noInline())
        try await old.setIndexes(namespace: "t", InlineObjectTests.indexes)
        for op in ops { _ = try await old.submit(namespace: "t", op) }
        #expect(try InlineObjectTests.tags(old)[InlineObject.tag] == nil)
        old.close()
        return dir
    }

    @Test(arguments: [21, 22, 23] as [UInt64])
    func aPerLeafDirectoryIsRewrittenWhenItOpens(seed: UInt64) async throws {
        let ops = InlineObjectTests.randomOps(seed, count: 300)
        let dir = try await perLeafDirectory(Array(ops.prefix(200)))
        // The same writes on a store that stays per leaf: the observable reference.
        let b = try openStore(tempDir(), noInline())
        defer { b.close() }
        try await b.setIndexes(namespace: "t", InlineObjectTests.indexes)
        for op in ops.prefix(200) { _ = try await b.submit(namespace: "t", op) }

        do {
            let a = try openStore(dir)
            #expect(a.objectsInlinedOnOpen > 0)
            #expect(try InlineObjectTests.tags(a)[InlineObject.tag] == a.objectsInlinedOnOpen)
            try InlineObjectTests.expectSame(a, b, "after the migration")
            let (stored, rebuilt) = try await DerivedIndexTests.storedAndRebuilt(a)
            #expect(stored == rebuilt)
            // Writes in, below, above and beside the rewritten objects answer as the other store's.
            for (i, op) in ops.suffix(100).enumerated() {
                let ra = try await a.submit(namespace: "t", op), rb = try await b.submit(namespace: "t", op)
                #expect(ra.outcome == rb.outcome && ra.version == rb.version && ra.value == rb.value, "result of write \(200 + i)")
            }
            try InlineObjectTests.expectSame(a, b, "after writes on the migrated directory")
            a.close()
        }
        // Migrated once: the next open does not scan again.
        let again = try openStore(dir)
        defer { again.close() }
        #expect(again.objectsInlinedOnOpen == 0)
        try InlineObjectTests.expectSame(again, b, "after reopening")
    }

    /// Exactly the objects a write would have stored inline with the same versions become inline.
    @Test func whatIsRewrittenAndWhatStaysPerLeaf() async throws {
        let long = String(repeating: "k", count: 600)
        let seventeen = (0...InlineObject.maxChildren).map { "\"k\($0)\": \($0)" }.joined(separator: ", ")
        let script: [(String, String)] = [
            ("/items/a", #"{"score": 1, "name": "n"}"#),          // rewritten
            ("/items/b", #"{"x": 1, "y": 2}"#), ("/items/b/x", "5"),   // a child written later: stays
            ("/items/c", #"{"x": 1, "y": 2}"#), ("/items/c/y", "null"),  // a child deleted: stays
            ("/items/d", #"{"x": {"y": 1}, "z": 2}"#),            // nested: d stays, d/x rewritten
            ("/items/e", "{\(seventeen)}"),                       // too many children: stays
            ("/items/f", #"{".priority": 3, "a": {".value": 1, ".priority": "p"}, "b": true}"#),  // priorities: rewritten
            ("/top", "1"),                                        // a leaf of the root
            ("/items/g", "{\"\(long)\": 1}"),                     // a key past the tree table: stays
            ("/items/j", #"{"a": 1}"#), ("/items/j/b/c", "1"),   // grew a nested child: stays; j/b too (its
                                                                  // newest write is below it, not at it)
            ("/items/k", #"{"a": 1}"#), ("/items/k/a", "1"),     // rewritten with the same value: no new version
        ]
        var ops = script.map { WriteOperation.set(path: p($0.0), value: j($0.1)) }
        ops.append(.update(path: p("/items"), values: [(p("h"), j(#"{"k": 1}"#)), (p("i"), j(#"{"k": 2, "l": "x"}"#))]))  // rewritten
        let dir = try await perLeafDirectory(ops)
        let b = try openStore(tempDir(), noInline())
        defer { b.close() }
        for op in ops { _ = try await b.submit(namespace: "t", op) }

        let a = try openStore(dir)
        defer { a.close() }
        #expect(try Self.inlinePaths(a) == ["/items/a", "/items/d/x", "/items/f", "/items/h", "/items/i", "/items/k"])
        var paths = ["/", "/top", "/items", "/items/nope", "/items/a/score/deeper"]
        for (path, _) in script { paths += [path, path + "/x", path + "/a", path + "/y", path + "/x/y"] }
        paths += ["/items/j/b", "/items/j/b/x", "/items/h", "/items/h/k", "/items/i/l", "/items/f/a", "/items/e/k3", "/items/g/" + long]
        for path in paths {
            let ra = try a.read(namespace: "t", path: p(path)), rb = try b.read(namespace: "t", path: p(path))
            #expect(ra.node == rb.node && ra.version == rb.version, "\(path)")
            #expect(try a.shallowKeys(namespace: "t", path: p(path)) == b.shallowKeys(namespace: "t", path: p(path)), "\(path)")
        }
        #expect(try a.stateHash() == b.stateHash())
        // The rewritten object's version stays the write's: its leaves answer a conditional write.
        let v = try b.read(namespace: "t", path: p("/items/a/name")).version
        let r = try await a.set("/items/a/name", #""m""#, .ifVersion(v))
        #expect(r.outcome == .applied(changed: true))
        #expect(try a.get("/items/a") == n(#"{"score": 1, "name": "m"}"#))
    }

    /// A follower installing a snapshot (per leaf on the wire) stores small objects inline.
    @Test(arguments: [31, 32] as [UInt64])
    func anInstalledSnapshotIsRewritten(seed: UInt64) async throws {
        for leaderOptions in [smallOptions(), noInline()] {
            let leader = try openStore(tempDir(), leaderOptions)
            defer { leader.close() }
            try await leader.setIndexes(namespace: "t", InlineObjectTests.indexes)
            for op in InlineObjectTests.randomOps(seed, count: 200) { _ = try await leader.submit(namespace: "t", op) }
            var chunks: [[UInt8]] = []
            try leader.snapshot(maxChunkBytes: 400) { chunks.append($0) }
            let follower = try openStore()
            defer { follower.close() }
            try await follower.installSnapshot(chunks: chunks)
            let installed = try InlineObjectTests.tags(follower)[InlineObject.tag] ?? 0
            #expect(installed > 0)
            // Every object the leader keeps inline is inline on the follower (the stream's form
            // of one always qualifies).
            #expect(installed >= (try InlineObjectTests.tags(leader)[InlineObject.tag] ?? 0))
            try InlineObjectTests.expectSame(follower, leader, "installed snapshot")
            let (stored, rebuilt) = try await DerivedIndexTests.storedAndRebuilt(follower)
            #expect(stored == rebuilt)
        }
    }

    /// `compact` of a per-leaf directory writes the inline layout; the source is only read.
    @Test func compactRewritesAFormerLayoutWithoutTouchingTheSource() async throws {
        var kids: [(Path, JSON)] = []
        for i in 0..<3_000 { kids.append((p(String(format: "c%05d", i)), j(#"{"score": \#(i % 97), "name": "n\#(i)"}"#))) }
        let ops: [WriteOperation] = [.update(path: p("/items"), values: kids)]
        let dir = try await perLeafDirectory(ops)
        let sourceBytes = try Data(contentsOf: URL(fileURLWithPath: dir + "/data.mdb"))
        let out = tempDir() + "/compacted"
        let (before, after) = try EmberStore.compact(directory: dir, output: out)
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir + "/data.mdb")) == sourceBytes)
        #expect(after < before)
        let left = try FileManager.default.contentsOfDirectory(atPath: dir)
        #expect(left.allSatisfy { !$0.hasPrefix(".compact") }, "the staging copy is gone: \(left)")
        let c = try openStore(out)
        defer { c.close() }
        #expect(c.objectsInlinedOnOpen == 0)  // already rewritten by compact
        #expect(try InlineObjectTests.tags(c)[InlineObject.tag] == 3_000)
        let ref = try openStore(dir, noInline())
        defer { ref.close() }
        #expect(try c.get("/items") == ref.get("/items"))
        #expect(try c.stateHash() == ref.stateHash())
        for path in ["/items", "/items/c00007", "/items/c00007/name"] {
            #expect(try c.read(namespace: "t", path: p(path)).version == ref.read(namespace: "t", path: p(path)).version)
        }
        let spec = QuerySpec(index: .child(p("score")), limit: 3, limitFromStart: false)
        #expect(try c.query(namespace: "t", path: p("/items"), spec: spec).map(\.key) == ref.query(namespace: "t", path: p("/items"), spec: spec).map(\.key))
    }

    /// A pass bounded to a few objects resumes where it stopped and ends with the same result.
    @Test func boundedPassesResume() async throws {
        let ops = InlineObjectTests.randomOps(41, count: 250)
        let dir = try await perLeafDirectory(ops)
        let whole = try openStore(try copyDirectory(dir))
        defer { whole.close() }
        let stepwise = try openStore(dir, noInline())
        defer { stepwise.close() }
        let tables = stepwise.tables
        let passes = try await stepwise.perform { w in
            try w.writeTxn { t in
                var passes = 0
                var from: [UInt8] = []
                while true {
                    let (_, next) = try Reinline.pass(tables, t, from: from, maxObjects: 1)
                    passes += 1
                    guard let next else { return passes }
                    from = next
                }
            }
        }
        #expect(passes > 2)
        #expect(try Self.inlinePaths(stepwise) == Self.inlinePaths(whole))
        try InlineObjectTests.expectSame(stepwise, whole, "stepwise")
    }

    func copyDirectory(_ dir: String) throws -> String {
        let to = tempDir()
        try FileManager.default.copyItem(atPath: dir + "/data.mdb", toPath: to + "/data.mdb")
        return to
    }
}
