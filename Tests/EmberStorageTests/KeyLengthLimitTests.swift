import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// The storage key limit (README "Known limit"): namespace + 1, plus per path segment its UTF-8
/// length + 2 (integer-like keys + 8), down to the deepest key of the written data, must fit in
/// `Tables.maxTreeKeyBytes` (420) because LMDB keys hold at most 511 bytes and index keys add up
/// to 76 more. Longer writes are refused before the log with a clear error and write nothing.
@Suite struct KeyLengthLimitTests {
    /// Namespace "t" (2 bytes) + one string key of `n` bytes (n + 2) = n + 4.
    func key(_ n: Int) -> String { String(repeating: "k", count: n) }

    @Test func exactlyAtTheLimitIsStoredAndOneByteMoreIsRefused() async throws {
        let s = try openStore()
        let fits = Tables.maxTreeKeyBytes - 4
        let r = try await s.set(key(fits), "1")
        #expect(r.isApplied)
        #expect(try s.get(key(fits)) == n("1"))
        await #expect(throws: StorageError.pathTooLongForStorage(bytes: Tables.maxTreeKeyBytes + 1, limit: Tables.maxTreeKeyBytes)) {
            try await s.set(key(fits + 1), "1")
        }
        // The data's own keys count: a child under the path pushes the deepest key over.
        await #expect(throws: StorageError.self) { try await s.set("a", #"{"\#(key(fits - 3))": {"b": 1}}"#) }
        // Integer-like keys take 8 bytes plus their length: "7" costs 9.
        let intFits = Tables.maxTreeKeyBytes - 2 - 9
        #expect(try await s.set(key(intFits - 2) + "/7", "1").isApplied)
        await #expect(throws: StorageError.self) { try await s.set(key(intFits - 1) + "/7", "1") }
        // Refused writes left no trace: two entries in the log, one value each.
        #expect(s.lastLogIndex == 2)
        #expect(try s.get("a").isEmpty)
        #expect(try s.get(key(fits + 1)).isEmpty)
    }

    @Test func theErrorSaysWhatCountsAndTheLimit() {
        let e = StorageError.pathTooLongForStorage(bytes: 500, limit: 420)
        #expect(e.description.contains("500"))
        #expect(e.description.contains("420"))
        #expect(e.description.contains("768"))
    }
}
