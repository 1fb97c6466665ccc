@testable import EmberFuzz
import Foundation
import Testing

/// The fuzz smoke run of the default suite: every committed input (seeds, and every crash a
/// libFuzzer run found, kept as a regression) replayed through its harness in the ordinary build.
/// The long libFuzzer runs are `make fuzz` (docs/TESTING.md "Fuzzing").
@Suite("fuzz corpus replay")
struct CorpusReplayTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Corpus")

    static func inputs(_ target: String) -> [URL] {
        let dir = corpus.appendingPathComponent(target)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        return names.sorted().map { dir.appendingPathComponent($0) }
    }

    @Test("every committed input holds the harness properties", arguments: ["json", "path", "rest", "wire", "rules", "httphead"])
    func replay(target: String) throws {
        let files = Self.inputs(target)
        #expect(files.count >= 5, "corpus of \(target) has \(files.count) inputs")
        let harness = try #require(FuzzHarness.targets[target])
        for file in files {
            let bytes = try [UInt8](Data(contentsOf: file))
            do { try harness(bytes) } catch {
                Issue.record("\(target)/\(file.lastPathComponent): \(error)")
            }
        }
    }

    @Test("a violated property is reported, not ignored")
    func harnessCanFail() {
        // Two paths whose storage encodings would have to order like Firebase keys: a wrong
        // expectation fed directly to the checker must throw.
        #expect(throws: FuzzViolation.self) { try FuzzHarness.check(false, "deliberate") }
    }
}
