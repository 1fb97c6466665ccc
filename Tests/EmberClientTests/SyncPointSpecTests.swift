import EmberClient
import EmberCore
import Testing

@Suite("syncPointSpec (Firebase SDK event-generation spec)")
struct SyncPointSpecTests {
    @Test("spec file has all 112 cases")
    func specLoaded() {
        #expect(SyncPointSpec.cases.count == 112)
        #expect(Set(SyncPointSpec.caseNames).count == 112)
    }

    @Test("spec case", arguments: SyncPointSpec.caseNames, ["", "foo/bar/baz"])
    func specCase(name: String, basePath: String) throws {
        let testCase = try #require(SyncPointSpec.named(name))
        var run = SyncPointSpecRun(basePath: basePath)
        do {
            try run.runAll(testCase.steps)
        } catch let failure as SpecFailure {
            Issue.record("\(name) @ '\(basePath)': \(failure.description)")
        }
    }
}
