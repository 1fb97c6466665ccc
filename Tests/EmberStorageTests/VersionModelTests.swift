import EmberCore
import Foundation
import Testing
import EmberTestSupport
@testable import EmberStorage

/// Versions against their definition: the version of a path is the log index of the last write
/// that changed anything at, below or above it. The model keeps every write's changed paths and
/// takes the largest index among writes whose path is an ancestor, the path itself or a
/// descendant; the store must agree at every path, after one-by-one commits and after a batch
/// (flat apply with pending ancestor versions). Leaves keep their version in their tree record,
/// objects and deletions in the version table: the random writes move paths between all three.
@Suite(.printsSeedOnFailure) struct VersionModelTests {
    static let keys = ["a", "b", "1", "x"]

    struct Model {
        var writes: [(index: UInt64, paths: [[String]])] = []
        func version(_ p: [String]) -> UInt64 {
            var best: UInt64 = 0
            for w in writes where w.paths.contains(where: { $0.starts(with: p) || p.starts(with: $0) }) {
                best = max(best, w.index)
            }
            return best
        }
    }

    func randomOps(_ seed: UInt64, count: Int) -> [WriteOperation] {
        var g = TestSeed.generator(seed)
        func randomPath() -> [String] { (0..<Int.random(in: 0...3, using: &g)).map { _ in Self.keys.randomElement(using: &g)! } }
        func randomValue(_ depth: Int) -> JSON {
            switch Int.random(in: 0..<8, using: &g) {
            case 0: return .null
            case 1, 2, 3: return .int(Int64.random(in: 0..<3, using: &g))
            default:
                guard depth < 3 else { return .string("s") }
                var d: KeyMap<JSON> = [:]
                for _ in 0..<Int.random(in: 1...2, using: &g) { d[Self.keys.randomElement(using: &g)!] = randomValue(depth + 1) }
                return .object(d)
            }
        }
        return (0..<count).map { _ in
            let path = randomPath()
            if Int.random(in: 0..<3, using: &g) > 0 {
                // Mostly below the root: a root write resets everything.
                let p = path.isEmpty ? [Self.keys.randomElement(using: &g)!] : path
                return .set(path: Path(validated: p), value: randomValue(p.count))
            }
            var parts: [(Path, JSON)] = []
            var seen: Set<String> = []
            for _ in 0..<Int.random(in: 1...3, using: &g) {
                let k = Self.keys.randomElement(using: &g)!
                if seen.insert(k).inserted { parts.append((Path(validated: [k]), randomValue(path.count + 1))) }
            }
            return .update(path: Path(validated: path), values: parts)
        }
    }

    /// Every path up to depth 4 over the key alphabet (341 paths: touched or not).
    var allPaths: [[String]] {
        var out: [[String]] = [[]]
        var level: [[String]] = [[]]
        for _ in 0..<4 {
            level = level.flatMap { p in Self.keys.map { p + [$0] } }
            out += level
        }
        return out
    }

    func check(_ s: EmberStore, _ results: [WriteResult]) throws {
        var model = Model()
        for r in results where r.outcome == .applied(changed: true) {
            model.writes.append((r.index, r.changeSet.changes.map { $0.0.segments }))
        }
        for p in allPaths {
            let text = "/" + p.joined(separator: "/")
            #expect(try s.ver(text) == model.version(p), "version of \(text)")
        }
        // A write's result carries the version its base path has right after it.
        for r in results where r.outcome == .applied(changed: true) { #expect(r.version == r.index) }
    }

    @Test(arguments: [11, 12, 13, 14, 15] as [UInt64])
    func oneCommitPerWrite(seed: UInt64) async throws {
        let s = try openStore()
        var results: [WriteResult] = []
        for op in randomOps(seed, count: 150) { results.append(try await s.submit(namespace: "t", op)) }
        try check(s, results)
    }

    @Test(arguments: [21, 22, 23, 24, 25] as [UInt64])
    func oneBatch(seed: UInt64) async throws {
        let s = try openStore()
        let entries = randomOps(seed, count: 300).enumerated().map { i, op in
            LogEntry(index: UInt64(i + 1), term: 1, namespace: "t", operation: op, timestamp: 1_000, auth: .admin)
        }
        let results = try await s.apply(entries: entries)
        #expect(s.metrics.nestedRetries == 0)
        try check(s, results)
    }
}

/// Data directories written before leaves kept their versions: a leaf record without one (tag 1)
/// and its version row. Their versions read as before, and rewriting such a leaf moves its version
/// into its record and drops the row.
@Suite(.printsSeedOnFailure) struct OldFormatVersionTests {
    @Test func leavesWithVersionRowsReadAndMigrateOnWrite() async throws {
        let s = try openStore()
        try await s.set("/a/other", "1")                                          // 1
        try await s.set("/z", "1")                                                // 2
        // An old-format leaf /a/b, as if written by entry 2.
        try await s.perform { w in
            try w.writeTxn { t in
                let key = EncodedPath("t", p("/a/b"))
                try t.put(w.tables.treeS, key.bytes, TreeRecord.leaf(.int(5), nil).encoded)
                try w.tables.putVersion(t, key.bytes, sub: 2, at: 2)
                try w.tables.putVersion(t, key.ancestor(1), sub: 2, at: 0)
            }
        }
        #expect(try s.get("/a/b") == n("5"))
        #expect(try s.ver("/a/b") == 2 && s.ver("/a") == 2 && s.ver("/a/b/c") == 2 && s.ver("/a/other") == 1)
        func verRow(_ path: String) throws -> Bool {
            try s.withRead { t in try t.get(s.tables.verS, EncodedPath("t", p(path)).bytes) != nil }
        }
        #expect(try verRow("/a/b"))
        let r = try await s.set("/a/b", "6")                                      // 3
        #expect(r.version == 3 && r.index == 3)
        #expect(try s.ver("/a/b") == 3 && s.ver("/a") == 3 && s.ver("/a/other") == 1)
        #expect(try !verRow("/a/b"))  // moved into the record
        // Converting the leaf into an object keeps its version as the node's own.
        try await s.set("/a/b/c", "1")                                            // 4
        #expect(try s.ver("/a/b/d") == 3 && s.ver("/a/b") == 4 && s.ver("/a/b/c") == 4)
    }
}
