import Foundation
import Testing
import EmberTestSupport

/// Process tests start the executables of the build they belong to: a `swift test -c release`
/// or `--scratch-path` run must not pick up a stale `.build/debug/emberd`.
@Suite struct BuiltProductsTests {
    @Test func emberdIsTakenFromTheRunningTestBuild() throws {
        let dir = try #require(ChildProcess.productsDirectory)
        let emberd = ChildProcess.built("emberd")
        #expect(FileManager.default.isExecutableFile(atPath: emberd))
        #expect(URL(fileURLWithPath: emberd).deletingLastPathComponent().standardizedFileURL.path
                == dir.standardizedFileURL.path)
    }
}
