import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// Per-table footprint and offline compaction on real LMDB files.
@Suite struct FootprintTests {
    func fill(_ s: EmberStore, children: Int) async throws {
        var kids: [String: JSON] = [:]
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
