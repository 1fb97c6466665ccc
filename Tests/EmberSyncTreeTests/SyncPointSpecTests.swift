import EmberSyncTree
import EmberCore
import Testing

@Suite("syncPointSpec (Firebase SDK event-generation spec)")
struct SyncPointSpecTests {
    @Test("spec file has all 112 cases")
    func specLoaded() {
        #expect(SyncPointSpec.cases.count == 112)
        #expect(Set(SyncPointSpec.caseNames).count == 112)
    }

    @Test("the runner compares every expected event (579 per base path)", arguments: ["", "foo/bar/baz"])
    func runnerIsNotVacuous(basePath: String) throws {
        var total = 0
        for c in SyncPointSpec.cases {
            var run = SyncPointSpecRun(basePath: basePath)
            try? run.runAll(c.steps)
            total += run.matchedEvents
        }
        #expect(total == 579)
    }

    @Test("the runner rejects a wrong expectation")
    func runnerRejectsMismatch() throws {
        let original = try #require(SyncPointSpec.named("Default listen handles a set at the same level"))
        // Change the data of the last expected event of the last step.
        var steps = original.steps
        guard case .object(var step) = steps[steps.count - 1], case .array(var events)? = step["events"],
              case .object(var last) = events[events.count - 1] else {
            Issue.record("unexpected spec shape")
            return
        }
        last["data"] = .string("not the data")
        events[events.count - 1] = .object(last)
        step["events"] = .array(events)
        steps[steps.count - 1] = .object(step)
        var run = SyncPointSpecRun(basePath: "")
        #expect(throws: SpecFailure.self) { try run.runAll(steps) }
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
