import EmberTestSupport
import Testing
@testable import EmberCore

/// `Path.sortKey` orders paths exactly as `Path.<` does (a multi-path update is sorted by it).
@Suite(.printsSeedOnFailure) struct PathSortKeyTests {
    /// The integer group's edges (signs, leading zeros, Int32's bounds and past them), text next
    /// to it, and text whose UTF-16 order differs from its UTF-8 order.
    static let keys = ["0", "00", "-0", "7", "007", "-1", "-2147483648", "2147483647", "2147483648", "-2147483649",
                       "1a", "a", "ab", "b", "-", "-x", "\u{E000}", "\u{FFFD}", "😀", "é", "Z", "~"]

    @Test func sortKeysOrderAsPaths() {
        var g = TestSeed.generator(0x5027_4E75)
        func path() -> Path { Path(validated: (0..<Int.random(in: 0...3, using: &g)).map { _ in Self.keys.randomElement(using: &g)! }) }
        for round in 0..<20_000 {
            let a = path(), b = path()
            #expect((a < b) == a.sortKey.lexicographicallyPrecedes(b.sortKey), "round \(round): \(a) vs \(b)")
            #expect((a == b) == (a.sortKey == b.sortKey), "round \(round): \(a) vs \(b)")
        }
    }
}
