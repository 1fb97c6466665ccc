// Snapshot files for Raft transfers: written from one read transaction, staged chunk by chunk
// on the receiving side, installed atomically.

import EmberCore
import Foundation
import Testing
@testable import EmberStorage

@Suite struct SnapshotFileTests {
    /// A store with several namespaces, an index and rules, so every table-tagged record kind
    /// travels.
    func populated() async throws -> EmberStore {
        let a = try openStore()
        try await a.setIndexes(namespace: "t", [try IndexSpec(location: "/u", indexes: ["h"])])
        for i in 0..<300 { try await a.set("/u/\(i)", #"{"h": \#(i % 7), "pad": "\#(String(repeating: "p", count: 40))"}"#) }
        try await a.set("/x", "1", ns: "n2")
        return a
    }

    /// Copies `file` into a staging file in pieces of `piece` bytes, as Raft chunks arrive.
    func stage(_ file: String, piece: Int, upTo limit: Int? = nil) throws -> SnapshotStaging {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
        let staging = SnapshotStaging(path: tempDir() + "-staging")
        var offset = 0
        while offset < min(bytes.count, limit ?? .max) {
            let end = min(offset + piece, bytes.count, limit ?? .max)
            try staging.write(offset: offset, Array(bytes[offset..<end]))
            offset = end
        }
        try staging.finish()
        return staging
    }

    @Test func multiChunkSnapshotInstallsChunkByChunk() async throws {
        let a = try await populated()
        let file = tempDir() + "-snap"
        let info = try a.writeSnapshotFile(path: file, maxChunkBytes: 1_024)
        let fileSize = (try FileManager.default.attributesOfItem(atPath: file)[.size] as? NSNumber)?.intValue
        #expect(info.index == a.appliedIndex && info.size == fileSize)
        #expect(info.size > 10 * 1_024)  // many store chunks
        // Raft chunks do not line up with the store's frames: stage at an odd size.
        let staging = try stage(file, piece: 333)
        #expect(staging.size == info.size)
        let b = try openStore()
        try await b.set("/old", "1")  // replaced entirely
        try await b.installSnapshot(file: staging.path)
        #expect(b.appliedIndex == a.appliedIndex && b.lastLogIndex == a.appliedIndex)
        #expect(try b.stateHash() == a.stateHash())
        #expect(try b.get("/old").isEmpty)
        let q = QuerySpec(index: .child(p("h"))).equal(to: .number(3))
        #expect(try b.query(namespace: "t", path: p("/u"), spec: q).map(\.key) == a.query(namespace: "t", path: p("/u"), spec: q).map(\.key))
        let r = try await b.set("/x", "2", ns: "n2")
        #expect(r.index == a.appliedIndex + 1)
    }

    @Test func abortedInstallLeavesTheOldStateIntact() async throws {
        let a = try await populated()
        let file = tempDir() + "-snap"
        let info = try a.writeSnapshotFile(path: file, maxChunkBytes: 1_024)
        let b = try openStore()
        for i in 0..<20 { try await b.set("/mine/\(i)", "\(i)") }
        let hash = try b.stateHash()
        let applied = b.appliedIndex
        // A transfer cut off part-way (the staging file ends inside a frame) does not install.
        let partial = try stage(file, piece: 500, upTo: info.size / 2 + 3)
        await #expect(throws: StorageError.self) { try await b.installSnapshot(file: partial.path) }
        // Nor does garbage where a frame header should be.
        let garbage = SnapshotStaging(path: tempDir() + "-garbage")
        try garbage.write(offset: 0, [0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3])
        try garbage.finish()
        await #expect(throws: StorageError.self) { try await b.installSnapshot(file: garbage.path) }
        // The old state is untouched and the store keeps working.
        #expect(try b.stateHash() == hash && b.appliedIndex == applied)
        #expect(try b.get("/mine/3") == n("3"))
        let r = try await b.set("/mine/x", "1")
        #expect(r.index == applied + 1)
        // Restarting the transfer from offset 0 then installs it.
        let full = try stage(file, piece: 4_096)
        try await b.installSnapshot(file: full.path)
        #expect(try b.stateHash() == a.stateHash())
    }

    @Test func stagingRefusesGapsAndRestartsAtZero() throws {
        let staging = SnapshotStaging(path: tempDir() + "-staging")
        try staging.write(offset: 0, [1, 2, 3])
        #expect(throws: StorageError.self) { try staging.write(offset: 5, [9]) }
        try staging.write(offset: 3, [4])
        #expect(staging.size == 4)
        try staging.write(offset: 0, [7])  // a new transfer
        try staging.finish()
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: staging.path))) == [7])
        staging.discard()
        #expect(!FileManager.default.fileExists(atPath: staging.path))
    }
}
