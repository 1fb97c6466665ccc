import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// `StoreOptions.maxReadBytes` bounds what one client read materializes; writes over the same
/// data (which read the old value for their change sets) are not limited by it.
@Suite struct ReadLimitTests {
    @Test func readsOverTheLimitAreRefusedAndSmallerOnesServed() async throws {
        var o = smallOptions()
        o.maxReadBytes = 64 << 10
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let s = try openStore(dir, o)
        defer { s.close() }
        var big: KeyMap<JSON> = [:]
        for i in 0..<2_000 { big["k\(i)"] = .string(String(repeating: "x", count: 40)) }  // ~100 KB stored
        _ = try await s.submit(namespace: "t", .set(path: p("/big"), value: .object(big)))
        _ = try await s.submit(namespace: "t", .set(path: p("/small"), value: .int(1)))

        #expect(throws: StorageError.readTooLarge(limit: 64 << 10)) { try s.read(namespace: "t", path: p("/big")) }
        #expect(throws: StorageError.readTooLarge(limit: 64 << 10)) { try s.readSnapshot(namespace: "t", path: .root) }
        #expect(StorageError.readTooLarge(limit: 1).description
                == "Data requested exceeds the maximum size that can be accessed with a single request.")
        // Below the limit: a child of the big location, the small one, and keys only.
        #expect(try s.read(namespace: "t", path: p("/big/k7")).node.toJSON() == .string(String(repeating: "x", count: 40)))
        #expect(try s.read(namespace: "t", path: p("/small")).node.toJSON() == .int(1))
        #expect(try s.shallowKeys(namespace: "t", path: p("/big"), limit: 3) == ["k0", "k1", "k10"])
        // A write replacing the big value still works (it reads the old value without the limit).
        let r = try await s.submit(namespace: "t", .set(path: p("/big"), value: .int(2)))
        #expect(r.isApplied)
        #expect(try s.read(namespace: "t", path: p("/big")).node.toJSON() == .int(2))
    }
}
