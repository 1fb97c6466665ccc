import CLMDB
import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// The storage format mark (`BuildInfo.storageFormat`, deploy/OPERATIONS.md "Versions and
/// upgrades"): a directory is marked with the format of the build that opens it, one without a
/// mark (0.3.0 and before) opens and is marked, and one marked newer is refused untouched.
@Suite struct StorageFormatTests {
    /// The mark as stored, read with the store closed (nil: no mark).
    static func mark(_ dir: String) throws -> UInt64? {
        try withMeta(dir) { t, meta in
            guard let v = try Txn(ptr: t).get(meta, Array(Tables.storageFormatMetaKey.utf8)) else { return nil }
            var r = ByteReader(v)
            return try r.u64()
        }
    }

    /// Sets (or with nil removes) the mark directly in the closed directory's meta table.
    static func setMark(_ dir: String, _ value: UInt64?) throws {
        _ = try withMeta(dir, write: true) { t, meta -> UInt64? in
            let key = Array(Tables.storageFormatMetaKey.utf8)
            if let value {
                var w = ByteWriter(capacity: 8)
                w.u64(value)
                try Txn(ptr: t).put(meta, key, w.bytes)
            } else {
                _ = try Txn(ptr: t).delete(meta, key)
            }
            return nil
        }
    }

    static func withMeta<T>(_ dir: String, write: Bool = false, _ body: (OpaquePointer, MDB_dbi) throws -> T) throws -> T {
        let e = try openEnvironment(dir, mapSize: smallOptions().mapSize, flags: write ? 0 : flag(MDB_RDONLY))
        defer { mdb_env_close(e) }
        var t: OpaquePointer?
        try check(mdb_txn_begin(e, nil, write ? 0 : flag(MDB_RDONLY), &t))
        do {
            var dbi: MDB_dbi = 0
            try check(mdb_dbi_open(t, "meta", 0, &dbi))
            let out = try body(t!, dbi)
            try check(mdb_txn_commit(t))
            return out
        } catch {
            mdb_txn_abort(t)
            throw error
        }
    }

    @Test func aNewDirectoryIsMarkedWithThisBuildsFormat() async throws {
        let dir = tempDir()
        let s = try openStore(dir)
        try await s.set("/a", #"{"b": 1}"#)
        s.close()
        #expect(try Self.mark(dir) == UInt64(BuildInfo.storageFormat))
    }

    @Test func anUnmarkedDirectoryOfAnEarlierReleaseOpensAndIsMarked() async throws {
        let dir = tempDir()
        do {
            let s = try openStore(dir)
            try await s.set("/a", #"{"b": 1, "c": "x"}"#)
            s.close()
        }
        // As 0.3.0 left it: no mark at all.
        try Self.setMark(dir, nil)
        #expect(try Self.mark(dir) == nil)
        let s = try openStore(dir)
        #expect(try s.get("/a") == n(#"{"b": 1, "c": "x"}"#))
        s.close()
        #expect(try Self.mark(dir) == UInt64(BuildInfo.storageFormat))
    }

    @Test func aDirectoryMarkedNewerIsRefusedUntouched() async throws {
        let dir = tempDir()
        do {
            let s = try openStore(dir)
            try await s.set("/a", "7")
            s.close()
        }
        let newer = UInt64(BuildInfo.storageFormat + 1)
        try Self.setMark(dir, newer)
        let before = try Data(contentsOf: URL(fileURLWithPath: dir + "/data.mdb"))
        #expect(throws: StorageError.newerStorageFormat(found: newer, newest: BuildInfo.storageFormat)) {
            _ = try openStore(dir)
        }
        // The refusal wrote nothing (the open's first transaction was aborted).
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir + "/data.mdb")) == before)
        #expect(try Self.mark(dir) == newer)
        let message = StorageError.newerStorageFormat(found: newer, newest: BuildInfo.storageFormat).description
        #expect(message.contains("storage format \(newer)") && message.contains("up to \(BuildInfo.storageFormat)")
                && message.contains(BuildInfo.version))
        // Marked back down (what a build of that format would accept), it opens with its data.
        try Self.setMark(dir, UInt64(BuildInfo.storageFormat))
        let s = try openStore(dir)
        defer { s.close() }
        #expect(try s.get("/a") == n("7"))
    }

    @Test func theVersionTextNamesEveryLevel() {
        let text = BuildInfo.describe(program: "emberd")
        #expect(text.hasPrefix("emberd \(BuildInfo.version)\n"))
        #expect(text.contains("storage format \(BuildInfo.storageFormat) (opens \(BuildInfo.oldestStorageFormat)-\(BuildInfo.storageFormat)"))
        #expect(text.contains("peer protocol \(BuildInfo.peerProtocol) (speaks \(BuildInfo.oldestPeerProtocol)-\(BuildInfo.peerProtocol))"))
        #expect(BuildInfo.oldestStorageFormat <= BuildInfo.storageFormat && BuildInfo.oldestPeerProtocol <= BuildInfo.peerProtocol)
    }
}
