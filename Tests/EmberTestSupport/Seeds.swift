// Seeded randomness for the randomized (fuzz-style) tests: one generator, one way to choose its
// seed, and the seed printed when such a test fails, so every failure can be replayed.
@_exported import struct EmberRaft.SplitMix64
import Foundation
import Synchronization
import Testing

/// The seeds of randomized tests. Each test has a fixed default seed (the suite is the same on
/// every run); `EMBER_TEST_SEED` (decimal or 0x-hex) replaces it, to replay a failure or to explore
/// other seeds: `EMBER_TEST_SEED=0x5eed swift test --filter PeerFrameTests`.
public enum TestSeed {
    public static let variable = "EMBER_TEST_SEED"

    /// The override from the environment, if any (a malformed value stops the run: a typo must not
    /// silently replay the defaults).
    public static let override: UInt64? = {
        guard let text = ProcessInfo.processInfo.environment[variable], !text.isEmpty else { return nil }
        let parsed = text.lowercased().hasPrefix("0x") ? UInt64(text.dropFirst(2), radix: 16) : UInt64(text)
        guard let parsed else { fatalError("\(variable)=\(text): not a decimal or 0x-hex UInt64") }
        return parsed
    }()

    /// The seed a test draws with: the override when set, else `fixed`. Inside a test or suite
    /// marked `.printsSeedOnFailure`, the seed is printed if the test records an issue.
    public static func value(_ fixed: UInt64) -> UInt64 {
        let seed = override ?? fixed
        SeedLog.current?.drew(seed)
        return seed
    }

    /// A generator seeded with `value(fixed)`.
    public static func generator(_ fixed: UInt64) -> SplitMix64 { SplitMix64(seed: value(fixed)) }
}

/// The seeds a running test drew (task-local, so child tasks report to the same test).
final class SeedLog: Sendable {
    @TaskLocal static var current: SeedLog?
    private let state = Mutex<(seeds: [UInt64], printed: Bool)>(([], false))

    func drew(_ seed: UInt64) {
        state.withLock { if !$0.seeds.contains(seed) { $0.seeds.append(seed) } }
    }

    /// The replay line, once per test (nil when no seed was drawn or it was printed already).
    func replayLineOnce(_ name: String) -> String? {
        state.withLock { s -> String? in
            guard !s.seeds.isEmpty, !s.printed else { return nil }
            s.printed = true
            let seeds = s.seeds.map { "0x" + String($0, radix: 16) }
            return "\(name) failed with seed \(seeds.joined(separator: ", ")); replay: \(TestSeed.variable)=\(seeds[0]) swift test --filter '\(name)'"
        }
    }
}

/// Prints the seeds a test drew through `TestSeed` when the test records an issue.
///
/// Swift Testing has no failure hook; an intermittent known-issue scope whose matcher never
/// matches is one: the matcher sees every issue (and prints the seed), and answering "not known"
/// leaves each issue a failure as before.
public struct PrintsSeedOnFailure: TestTrait, SuiteTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(for test: Test, testCase: Test.Case?,
                             performing function: @Sendable () async throws -> Void) async throws {
        guard testCase != nil || !test.isSuite else { return try await function() }
        let log = SeedLog()
        // `swift test --filter` takes a pattern: the function's name without its argument list.
        let name = String(test.name.prefix { $0 != "(" })
        try await SeedLog.$current.withValue(log) {
            try await withKnownIssue(isIntermittent: true) {
                try await function()
            } matching: { _ in
                if let line = log.replayLineOnce(name) { print(line) }
                return false
            }
        }
    }
}

extension Trait where Self == PrintsSeedOnFailure {
    /// Prints the seeds the test drew (`TestSeed`) if it fails, with the command that replays it.
    public static var printsSeedOnFailure: Self { PrintsSeedOnFailure() }
}
