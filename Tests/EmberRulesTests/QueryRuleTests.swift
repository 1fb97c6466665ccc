import EmberCore
import Testing
@testable import EmberRules

/// `query` in `.read` rules (docs: "query-based rules").
struct QueryRuleTests {
    let engine: RulesEngine
    let path = try! Path("/messages")

    init() throws {
        engine = try RulesEngine(text: """
            {"rules": {"messages": {
                ".read": "query.orderByKey && query.limitToFirst <= 100",
                "$m": {".read": "query.orderByChild == 'owner' && query.equalTo == auth.uid"}
            }}}
            """)
    }

    @Test func limitedQueryIsAllowed() {
        let q = QuerySpec(index: .key).limited(toFirst: 50)
        #expect(engine.canRead(path: path, auth: nil, root: .empty, now: 0, query: q))
    }

    @Test func unboundedOrTooLargeQueriesAreDenied() {
        #expect(!engine.canRead(path: path, auth: nil, root: .empty, now: 0))
        #expect(!engine.canRead(path: path, auth: nil, root: .empty, now: 0, query: QuerySpec(index: .key)))
        #expect(!engine.canRead(path: path, auth: nil, root: .empty, now: 0, query: QuerySpec(index: .key).limited(toFirst: 500)))
        #expect(!engine.canRead(path: path, auth: nil, root: .empty, now: 0, query: QuerySpec(index: .key).limited(toLast: 5)))
    }

    @Test func equalToOwnUid() throws {
        let q = QuerySpec(index: .child(try Path("owner"))).equal(to: .string("alice"))
        let alice: JSON = .object(["uid": .string("alice")])
        let child = try Path("/messages/m1")
        #expect(engine.canRead(path: child, auth: alice, root: .empty, now: 0, query: q))
        #expect(!engine.canRead(path: child, auth: .object(["uid": .string("bob")]), root: .empty, now: 0, query: q))
    }

    @Test func queryIsReadOnlyAndTyped() {
        #expect(throws: RulesError.self) { try RulesEngine(text: #"{"rules": {".write": "query.orderByKey"}}"#) }
        #expect(throws: RulesError.self) { try RulesEngine(text: #"{"rules": {".read": "query.limit == 1"}}"#) }
    }
}
