import EmberCore
import EmberTestSupport
import Foundation
import Testing
@testable import EmberStorage

/// Bulk writes put their index rows and tree records in key order, with MDB_APPEND past the
/// table's end (issue 41): a load into an empty location writes pages as full as a compacted
/// copy's, where rows in the update's order (random scores) left them about half full.
@Suite(.printsSeedOnFailure) struct BulkLoadPagesTests {
    func pages(_ s: EmberStore, _ table: String) throws -> Int {
        try s.footprint().tables.first { $0.name == table }!.pages
    }

    @Test func aBulkUpdateIntoAnEmptyIndexWritesFullPages() async throws {
        let dir = tempDir(), dense = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir); try? FileManager.default.removeItem(atPath: dense) }
        var o = smallOptions()
        o.logRetention = StoreOptions.singleNodeLogRetention
        let s = try openStore(dir, o)
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/items", indexes: ["score"])])
        var g = TestSeed.generator(41)
        let parts = (0..<10_000).map { i in
            (p(String(format: "/c%06d", i)), JSON.object(["score": .int(Int64.random(in: 0..<1_000_000_000, using: &g)), "name": .string("n")]))
        }
        _ = try await s.submit(namespace: "t", .update(path: p("/items"), values: parts.shuffled(using: &g)))
        let loaded = (index: try pages(s, "index"), tree: try pages(s, "tree"))
        let top = try s.query(namespace: "t", path: p("/items"), spec: QuerySpec(index: .child(p("score")), limit: 5, limitFromStart: false))
        s.close()
        try EmberStore.compact(directory: dir, output: dense)
        let c = try openStore(dense, o)
        defer { c.close() }
        let compacted = (index: try pages(c, "index"), tree: try pages(c, "tree"))
        #expect(Double(loaded.index) <= 1.05 * Double(compacted.index), "index \(loaded.index) pages, compacted \(compacted.index)")
        #expect(Double(loaded.tree) <= 1.05 * Double(compacted.tree), "tree \(loaded.tree) pages, compacted \(compacted.tree)")
        // The rows are the same ones: the same answer from both.
        let again = try c.query(namespace: "t", path: p("/items"), spec: QuerySpec(index: .child(p("score")), limit: 5, limitFromStart: false))
        #expect(top.map(\.key) == again.map(\.key) && top.count == 5)
    }

    /// Parts that are not one inline record each (nested objects, a priority, a few leaves: an
    /// export's users with their posts) put their records depth first in key order too: in the
    /// children map's order they split the table's last page in half over and over (an import's
    /// tree took about twice the pages of its compacted copy).
    @Test func aBulkUpdateOfNestedObjectsWritesFullPages() async throws {
        let dir = tempDir(), dense = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir); try? FileManager.default.removeItem(atPath: dense) }
        var o = smallOptions()
        o.logRetention = StoreOptions.singleNodeLogRetention
        let s = try openStore(dir, o)
        var g = TestSeed.generator(4242)
        let parts = (0..<3_000).map { i -> (Path, JSON) in
            var posts = KeyMap<JSON>()
            for j in 0..<Int.random(in: 1...4, using: &g) {
                posts["p\(j)"] = .object(["title": .string(String(repeating: "t", count: Int.random(in: 5...40, using: &g))),
                                          "likes": .int(Int64.random(in: 0..<10_000, using: &g)),
                                          ".priority": .int(Int64(j))])
            }
            return (p(String(format: "/u%06d", i)), .object([
                "name": .string("user\(i)"), "age": .int(Int64(i % 90)), "active": .bool(i % 2 == 0),
                "posts": .object(posts), "bio": .string(String(repeating: "b", count: Int.random(in: 20...300, using: &g))),
            ]))
        }
        _ = try await s.submit(namespace: "t", .update(path: p("/users"), values: parts.shuffled(using: &g)))
        let loaded = try pages(s, "tree")
        let want = try Node(json: .object(KeyMap(uniqueKeysWithValues: parts.map { ($0.0.segments.last!, $0.1) })), depth: 1)
        #expect(try s.get("/users") == want)
        s.close()
        try EmberStore.compact(directory: dir, output: dense)
        let c = try openStore(dense, o)
        defer { c.close() }
        let compacted = try pages(c, "tree")
        #expect(Double(loaded) <= 1.05 * Double(compacted), "tree \(loaded) pages, compacted \(compacted)")
        #expect(try c.get("/users") == want)
        #expect(try c.get("/users/u000007/posts/p0").priority != nil)
    }

    /// An update whose parts overwrite, delete and re-create children of an indexed location in
    /// one entry: the rows waiting for the update's end give the same index as plain writes.
    @Test func bulkRowsMatchTheTreeAfterMixedParts() async throws {
        let s = try openStore()
        defer { s.close() }
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/items", indexes: ["score"])])
        var first: [(Path, JSON)] = []
        for i in 0..<200 { first.append((p("/c\(i)"), .object(["score": .int(Int64(i))]))) }
        _ = try await s.submit(namespace: "t", .update(path: p("/items"), values: first))
        var mixed: [(Path, JSON)] = []
        for i in 0..<100 { mixed.append((p("/c\(i)"), .null)) }                               // deletes
        for i in 100..<150 { mixed.append((p("/c\(i)/score"), .int(Int64(1_000 - i)))) }      // below the child
        for i in 200..<260 { mixed.append((p("/c\(i)"), .object(["score": .int(Int64(i))]))) } // new children
        _ = try await s.submit(namespace: "t", .update(path: p("/items"), values: mixed))
        let all = try s.query(namespace: "t", path: p("/items"), spec: QuerySpec(index: .child(p("score"))))
        #expect(all.count == 160)
        #expect(try s.footprint().tables.first { $0.name == "index" }!.entries == 160)
        let scores = try all.map { try s.get("/items/\($0.key)/score") }
        let values = scores.map { n -> Int64 in if case .int(let v)? = n.leaf { return v }; return -1 }
        #expect(values == values.sorted(), "index order is the scores' order")
        #expect(all.first?.key == "c150" && all.last?.key == "c100")
    }
    /// Successive bulk updates that rewrite most index pages (random scores into a filled index):
    /// the pages each one frees are reused by the next (`Writer.releaseFreedPages`), so the free
    /// pages left at the end are about one update's copies. Without the empty turn after a
    /// growing commit LMDB kept two updates' worth (here ~2x the index's pages, 1.7x at 200,000).
    @Test func successiveBulkUpdatesReuseTheFreedPages() async throws {
        var o = smallOptions()
        o.logRetention = StoreOptions.singleNodeLogRetention
        let s = try openStore(tempDir(), o)
        defer { s.close() }
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/items", indexes: ["score"])])
        var g = TestSeed.generator(4141)
        for batch in 0..<12 {
            let parts = (0..<5_000).map { i in
                (p(String(format: "/c%02d%05d", batch, i)),
                 JSON.object(["score": .int(Int64.random(in: 0..<1_000_000_000, using: &g)), "name": .string("n")]))
            }
            _ = try await s.submit(namespace: "t", .update(path: p("/items"), values: parts))
        }
        let f = try s.footprint()
        let index = f.tables.first { $0.name == "index" }!.pages
        #expect(Double(f.freePages) <= 1.3 * Double(index), "free \(f.freePages) pages, index \(index) pages")
    }
}
