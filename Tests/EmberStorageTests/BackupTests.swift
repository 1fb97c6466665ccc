import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// Backup files: a real LMDB store written out and restored into another real store.
@Suite struct BackupTests {
    @Test func roundTripGivesTheSameStateHashAndData() async throws {
        let a = try openStore()
        defer { a.close() }
        for i in 0..<300 { try await a.set("/items/k\(i)", #"{"n":\#(i),"s":"\#(String(repeating: "x", count: i))"}"#) }
        try await a.set("/other", "42", ns: "ns2")
        try await a.setIndexes(namespace: "t", [try IndexSpec(location: "/items", indexes: ["n"])])
        let file = tempDir() + "/b.ember"
        let written = try a.writeBackup(to: file)
        #expect(written.appliedIndex == a.appliedIndex)

        let b = try openStore()
        defer { b.close() }
        try await b.set("/stale", "true")
        let restored = try await b.restoreBackup(from: file)
        #expect(restored == written)
        #expect(try b.stateHash() == a.stateHash())
        #expect(b.appliedIndex == a.appliedIndex)
        #expect(try b.get("/items/k7") == n(#"{"n":7,"s":"xxxxxxx"}"#))
        #expect(try b.get("/stale").isEmpty)
        #expect(try b.get("/other", ns: "ns2") == n("42"))
        #expect(try b.indexSpecs(namespace: "t") == a.indexSpecs(namespace: "t"))
        // Writes continue after the restored index.
        let r = try await b.set("/after", "1")
        #expect(r.index == a.appliedIndex + 1)
    }

    @Test func damagedOrTruncatedFilesAreRefusedBeforeAnythingChanges() async throws {
        let a = try openStore()
        defer { a.close() }
        for i in 0..<50 { try await a.set("/k\(i)", "\(i)") }
        let file = tempDir() + "/b.ember"
        try a.writeBackup(to: file)
        let good = try Data(contentsOf: URL(fileURLWithPath: file))

        let b = try openStore()
        defer { b.close() }
        try await b.set("/keep", "1")
        let hash = try b.stateHash()
        var flipped = good
        flipped[good.count / 2] ^= 0x01
        for (name, bytes) in [("flipped", flipped), ("truncated", good.prefix(good.count - 10)),
                              ("not a backup", Data("hello".utf8)), ("empty", Data())] {
            let bad = tempDir() + "/bad.ember"
            try bytes.write(to: URL(fileURLWithPath: bad))
            await #expect(throws: BackupError.self, "\(name)") { try await b.restoreBackup(from: bad) }
            #expect(try b.stateHash() == hash)
        }
    }

    @Test func backupOfAnEmptyStoreRestores() async throws {
        let a = try openStore()
        defer { a.close() }
        let file = tempDir() + "/empty.ember"
        let s = try a.writeBackup(to: file)
        #expect(s.appliedIndex == 0 && s.frames == 1)
        let b = try openStore()
        defer { b.close() }
        try await b.restoreBackup(from: file)
        #expect(try b.stateHash() == a.stateHash())
    }
}
