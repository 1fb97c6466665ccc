import EmberCore
import Testing
@testable import EmberRules

/// One compiled engine serves every connection: evaluating it from many tasks at once must be
/// safe (including the shared compiled regexes) and give the same answers.
@Test func sharedEngineAcrossTasks() async throws {
    let engine = try RulesEngine(text: #"{"rules": {"$k": {".read": "$k.matches(/^[a-z]+[0-9]*$/i) && auth.uid == 'u'"}}}"#)
    let auth: JSON = .object(["uid": .string("u")])
    let results = await withTaskGroup(of: (Int, Bool).self) { group in
        for i in 0..<400 {
            group.addTask {
                let key = i % 2 == 0 ? "Abc\(i)" : "abc_\(i)"
                return (i, engine.canRead(path: Path(validated: [key]), auth: auth, root: .empty, now: 0))
            }
        }
        var out: [Int: Bool] = [:]
        for await (i, r) in group { out[i] = r }
        return out
    }
    #expect(results.count == 400)
    #expect(results.allSatisfy { $0.value == ($0.key % 2 == 0) })
}
