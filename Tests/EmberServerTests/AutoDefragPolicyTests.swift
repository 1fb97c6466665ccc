import Testing
@testable import EmberServer

/// `--auto-defrag free-ratio,min-bytes,quiet-window`: parsing and when it is due.
@Suite struct AutoDefragPolicyTests {
    @Test func parsesRatioSizeAndWindow() throws {
        let p = try AutoDefragPolicy.parse("0.3,64MiB,30s")
        #expect(p == AutoDefragPolicy(freeRatio: 0.3, minBytes: 64 << 20, quietWindow: .seconds(30)))
        #expect(try AutoDefragPolicy.parse("0.5, 1048576, 2m").quietWindow == .seconds(120))
        #expect(try AutoDefragPolicy.parse("0.25,0,0").minBytes == 0)
        for bad in ["", "0.3,64MiB", "1.5,1M,1s", "0,1M,1s", "0.3,lots,1s", "0.3,1M,soon", "0.3,1M,100000s", "0.3,1M,1s,1"] {
            #expect(throws: (any Error).self, "\(bad)") { try AutoDefragPolicy.parse(bad) }
        }
    }

    @Test func dueOnlyWithEnoughFreeSpaceAfterAQuietWindow() throws {
        let p = try AutoDefragPolicy.parse("0.3,10MiB,30s")
        #expect(p.due(freeBytes: 40 << 20, fileBytes: 100 << 20, quiet: .seconds(31)))
        #expect(!p.due(freeBytes: 40 << 20, fileBytes: 100 << 20, quiet: .seconds(29)))   // writes too recent
        #expect(!p.due(freeBytes: 20 << 20, fileBytes: 100 << 20, quiet: .seconds(60)))   // under the ratio
        #expect(!p.due(freeBytes: 9 << 20, fileBytes: 20 << 20, quiet: .seconds(60)))     // under min-bytes
        #expect(!p.due(freeBytes: 0, fileBytes: 0, quiet: .seconds(60)))
    }
}
