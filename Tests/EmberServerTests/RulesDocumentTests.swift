import EmberCore
import Testing

@testable import EmberCluster
@testable import EmberNodeStore
@testable import EmberServer

@Suite struct RulesDocumentTests {
    @Test func indexOnWithWildcardsAndComments() throws {
        let doc = try RulesDocument(text: """
            {
              // comments are allowed, as firebase-tools uploads them
              "rules": {
                "dinosaurs": { ".indexOn": ["height", "dimensions/height"] },
                "scores": { ".indexOn": ".value" }, /* block */
                "users": { "$uid": { "posts": { ".indexOn": "ts" } } }
              }
            }
            """)
        #expect(doc.hasIndex(at: try Path("dinosaurs"), named: "height"))
        #expect(doc.hasIndex(at: try Path("dinosaurs"), named: "dimensions/height"))
        #expect(!doc.hasIndex(at: try Path("dinosaurs"), named: "weight"))
        #expect(doc.hasIndex(at: try Path("scores"), named: ".value"))
        #expect(doc.hasIndex(at: try Path("users/alice/posts"), named: "ts"))
        #expect(!doc.hasIndex(at: try Path("users/alice"), named: "ts"))
    }

    @Test func badRulesAreRefused() {
        #expect(throws: RestError.self) { try RulesDocument(text: "{") }
        #expect(throws: RestError.self) { try RulesDocument(text: #"{"nope": {}}"#) }
        #expect(throws: RestError.self) { try RulesDocument(text: #"{"rules": {"a": {".indexOn": 5}}}"#) }
        #expect(throws: RestError.self) { try RulesDocument(text: #"{"rules": {"a": {".indexOn": "b.c"}}}"#) }
    }
}
