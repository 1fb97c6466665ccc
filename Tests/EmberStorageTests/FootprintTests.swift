import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// Per-table footprint and offline compaction on real LMDB files.
@Suite struct FootprintTests {
    func fill(_ s: EmberStore, children: Int) async throws {
        var kids: KeyMap<JSON> = [:]
        for i in 0..<children { kids[String(format: "c%06d", i)] = .object(["score": .int(Int64(i)), "name": .string("n")]) }
        _ = try await s.submit(namespace: "t", .set(path: p("/items"), value: .object(kids)))
    }

    @Test func footprintCountsEntriesPerTable() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let s = try openStore(dir)
        defer { s.close() }
        try await fill(s, children: 500)
        let f = try s.footprint()
        let table = Dictionary(uniqueKeysWithValues: f.tables.map { ($0.name, $0) })
        #expect(table["tree"]?.entries == 500)  // one inline object record per child
        #expect(table["log"]?.entries == 1)
        #expect(table["index"]?.entries == 0)
        #expect(f.tables.allSatisfy { $0.bytes == $0.pages * f.pageSize })
        #expect(f.fileBytes >= f.liveBytes && f.liveBytes > 0)
        #expect(f.filePages * f.pageSize >= f.tables.map(\.bytes).reduce(0, +))
    }

    /// The issue's data set, smaller: children `{"score": i, "name": "n"}` loaded by updates of
    /// 10,000 (as PATCHes), with and without `.indexOn score`. The goals are ≤ 3 bytes of tables
    /// per JSON byte with the index and ≤ 2 without; inline objects and compact index rows give
    /// ~2.9 and ~1.55 (the per-leaf format gave 6.1 and 4.4).
    @Test(arguments: [true, false])
    func footprintPerJSONByteMeetsTheGoals(index: Bool) async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var o = smallOptions()
        o.logRetention = StoreOptions.singleNodeLogRetention
        let s = try openStore(dir, o)
        defer { s.close() }
        if index { try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/items", indexes: ["score"])]) }
        var json = 0
        for batch in 0..<3 {
            var parts: [(Path, JSON)] = []
            var body: KeyMap<JSON> = [:]
            for i in (batch * 10_000)..<((batch + 1) * 10_000) {
                let key = String(format: "c%07d", i)
                let child = JSON.object(["score": .int(Int64(i)), "name": .string("n")])
                parts.append((p("/" + key), child))
                body[key] = child
            }
            json += JSON.object(body).serializedBytes(pretty: false).count
            _ = try await s.submit(namespace: "t", .update(path: p("/items"), values: parts))
        }
        let f = try s.footprint()
        let tables = f.tables.map(\.bytes).reduce(0, +)
        let ratio = Double(tables) / Double(json)
        #expect(ratio <= (index ? 3.0 : 2.0), "\(tables) bytes of tables for \(json) bytes of JSON: \(ratio)")
        #expect(f.tables.first { $0.name == "tree" }?.entries == 30_000)
        #expect(f.tables.first { $0.name == "versions" }!.entries <= 2)
        print("footprint \(index ? "with" : "without") index: \(String(format: "%.2f", ratio)) table bytes per JSON byte")
    }

    @Test func compactionAfterDeletingMostDataGivesTheDiskBack() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var hash = ""
        var live = 0
        do {
            let s = try openStore(dir)
            try await fill(s, children: 20_000)
            // Delete 90 % of the children.
            for batch in 0..<3 {
                var parts: [(Path, JSON)] = []
                for i in (batch * 6_000)..<((batch + 1) * 6_000) { parts.append((p(String(format: "/c%06d", i)), .null)) }
                _ = try await s.submit(namespace: "t", .update(path: p("/items"), values: parts))
            }
            // Running: compaction is refused.
            #expect(throws: DataDirectoryInUse.self) { try EmberStore.compact(directory: dir) }
            hash = try s.stateHash()
            live = try s.footprint().liveBytes
            s.close()
        }
        let (before, after) = try EmberStore.compact(directory: dir)
        #expect(after < before)
        #expect(Double(after) <= 1.2 * Double(live), "compacted \(after) bytes for \(live) live bytes (before \(before))")
        let s = try openStore(dir)
        defer { s.close() }
        #expect(try s.stateHash() == hash)
        #expect(try s.shallowKeys(namespace: "t", path: p("/items")).count == 2_000)
        _ = try await s.submit(namespace: "t", .set(path: p("/after"), value: .int(1)))  // still writable
        #expect(try s.read(namespace: "t", path: p("/after")).node.toJSON() == .int(1))
    }
}
