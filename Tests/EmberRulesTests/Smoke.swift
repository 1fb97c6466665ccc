import Testing
import EmberCore
@testable import EmberRules

@Test func smoke() throws {
    let e = try RulesEngine(text: #"{"rules": {".read": "auth != null"}}"#)
    #expect(e.canRead(path: .root, auth: .object(["uid": .string("a")]), root: .empty, now: 0))
    #expect(!e.canRead(path: .root, auth: nil, root: .empty, now: 0))
}
