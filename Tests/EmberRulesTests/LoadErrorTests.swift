import EmberCore
import Testing
@testable import EmberRules

/// Bad rules documents are refused at load with the line of the offending member and a reason.
struct BadRules: Sendable, CustomTestStringConvertible {
    let name: String
    let text: String
    let line: Int
    let reason: String  // a fragment the reason must contain

    var testDescription: String { name }
}

enum BadRulesTable {
    static let all: [BadRules] = [
        BadRules(name: "not JSON", text: "{\n\"rules\": {\n\".read\": tru\n}}", line: 3, reason: "do not parse"),
        BadRules(name: "missing comma", text: "{\"rules\": {\n  \".read\": true\n  \".write\": true\n}}", line: 3, reason: "expected ','"),
        BadRules(name: "unterminated comment", text: "{\"rules\": {}}\n/* open", line: 2, reason: "unterminated"),
        BadRules(name: "top level not an object", text: "[1]", line: 1, reason: "must be an object"),
        BadRules(name: "no rules member", text: "{\n}", line: 1, reason: "missing \"rules\""),
        BadRules(name: "unknown top-level key", text: "{\"rules\": {},\n \"extra\": 1}", line: 2, reason: "unknown top-level key"),
        BadRules(name: "unknown dot rule", text: "{\"rules\": {\n \"a\": {\n  \".raed\": true}}}", line: 3, reason: "unknown rule \".raed\""),
        BadRules(name: "rule value a number", text: "{\"rules\": {\n \".read\": 1}}", line: 2, reason: "boolean or an expression string"),
        BadRules(name: "child rules not an object", text: "{\"rules\": {\n \"a\": true}}", line: 2, reason: "must be an object"),
        BadRules(name: "two wildcards", text: "{\"rules\": {\n \"$a\": {},\n \"$b\": {}}}", line: 3, reason: "two wildcards"),
        BadRules(name: "wildcard reused", text: "{\"rules\": {\"$a\": {\n \"$a\": {}}}}", line: 2, reason: "already used"),
        BadRules(name: "invalid key", text: "{\"rules\": {\n\n \"a#b\": {}}}", line: 3, reason: "invalid key"),
        BadRules(name: "bad indexOn", text: "{\"rules\": {\"a\": {\n \".indexOn\": 5}}}", line: 2, reason: ".indexOn"),
        BadRules(name: "syntax: dangling operator", text: "{\"rules\": {\n\n \".read\": \"auth != \"}}", line: 3, reason: "syntax error"),
        BadRules(name: "syntax: unbalanced paren", text: "{\"rules\": {\".read\": \"(true\"}}", line: 1, reason: "expected ')'"),
        BadRules(name: "syntax: unterminated string", text: "{\"rules\": {\".read\": \"'abc\"}}", line: 1, reason: "unterminated string"),
        BadRules(name: "syntax: free function call", text: "{\"rules\": {\n \".read\": \"exists()\"}}", line: 2, reason: "only methods"),
        BadRules(name: "syntax: regex outside matches", text: "{\"rules\": {\n \".read\": \"/a/ == 1\"}}", line: 2, reason: "syntax error"),
        BadRules(name: "syntax: bad regex flag", text: "{\"rules\": {\"$x\": {\n \".read\": \"$x.matches(/a/g)\"}}}", line: 2, reason: "flags"),
        BadRules(name: "syntax: invalid regex", text: "{\"rules\": {\"$x\": {\n \".read\": \"$x.matches(/(a/)\"}}}", line: 2, reason: "invalid regular expression"),
        BadRules(name: "type: .read not boolean", text: "{\"rules\": {\n \"a\": {\n  \".read\": \"'yes'\"}}}", line: 3, reason: "must be a boolean expression"),
        BadRules(name: "type: .write a snapshot", text: "{\"rules\": {\n \".write\": \"data\"}}", line: 2, reason: "must be a boolean expression"),
        BadRules(name: "type: unknown variable", text: "{\"rules\": {\n \".read\": \"user != null\"}}", line: 2, reason: "unknown variable 'user'"),
        BadRules(name: "type: newData in .read", text: "{\"rules\": {\n \".read\": \"newData.exists()\"}}", line: 2, reason: "newData is not available in .read"),
        BadRules(name: "type: capture not in scope", text: "{\"rules\": {\"a\": {\n \".read\": \"$uid == auth.uid\"}}}", line: 2, reason: "unknown variable $uid"),
        BadRules(name: "type: method on a number", text: "{\"rules\": {\n \".write\": \"now.exists()\"}}", line: 2, reason: "cannot call exists() on a number"),
        BadRules(name: "type: unknown snapshot method", text: "{\"rules\": {\n \".write\": \"data.size() > 1\"}}", line: 2, reason: "no method size()"),
        BadRules(name: "type: wrong arity", text: "{\"rules\": {\n \".write\": \"data.child() .exists()\"}}", line: 2, reason: "takes 1 argument, not 0"),
        BadRules(name: "type: wrong argument type", text: "{\"rules\": {\n \".write\": \"data.child(1).exists()\"}}", line: 2, reason: "needs a string argument"),
        BadRules(name: "type: snapshot compared", text: "{\"rules\": {\n \".write\": \"data == null\"}}", line: 2, reason: "cannot compare a snapshot"),
        BadRules(name: "type: method not called", text: "{\"rules\": {\n \".write\": \"data.exists\"}}", line: 2, reason: "must be called"),
        BadRules(name: "type: string member", text: "{\"rules\": {\"$k\": {\n \".write\": \"$k.size > 1\"}}}", line: 2, reason: "strings have no member 'size'"),
        BadRules(name: "type: arithmetic on boolean", text: "{\"rules\": {\n \".write\": \"true + 1 == 2\"}}", line: 2, reason: "column 6: operator + cannot combine"),
        BadRules(name: "type: && on a number", text: "{\"rules\": {\n \".write\": \"now && true\"}}", line: 2, reason: "needs a boolean"),
        BadRules(name: "type: matches with a string", text: "{\"rules\": {\"$k\": {\n \".write\": \"$k.matches('a')\"}}}", line: 2, reason: "regular expression literal"),
        BadRules(name: "type: hasChildren with a string", text: "{\"rules\": {\n \".write\": \"newData.hasChildren('a')\"}}", line: 2, reason: "hasChildren()"),
        BadRules(name: "type: number vs string ordering", text: "{\"rules\": {\n \".write\": \"now < 'a'\"}}", line: 2, reason: "cannot combine"),
        BadRules(name: "type: error after comments", text: "{\n// a comment\n/* a\n block */\n\"rules\": {\".read\": \"nope\"}}", line: 5, reason: "unknown variable 'nope'"),
    ]
}

@Test("Bad rules are refused with line and reason", arguments: BadRulesTable.all)
func badRules(_ c: BadRules) {
    #expect {
        _ = try RulesEngine(text: c.text)
    } throws: { error in
        guard let e = error as? RulesError else { return false }
        #expect(e.line == c.line, "\(c.name): \(e)")
        #expect(e.reason.contains(c.reason), "\(c.name): \(e)")
        #expect(e.description.hasPrefix("line \(c.line): "))
        return true
    }
}

@Test func commentsAndIndexOnAreAccepted() throws {
    let e = try RulesEngine(text: """
        {
          // line comment with "quotes" and /* inside
          "rules": {
            /* block */ ".read": "auth != null", // trailing
            "users": {".indexOn": ["age", "name"], "$uid": {".indexOn": ".value"}},
            "url": {".read": "'http://x' != ''"}
          }
        }
        """)
    #expect(e.indexDefinitions.map(\.pattern) == [["users"], ["users", "$uid"]])
    #expect(e.indexDefinitions.map(\.indexes) == [["age", "name"], [".value"]])
    #expect(e.hasIndex(at: try Path("/users"), named: "age"))
    #expect(e.hasIndex(at: try Path("/users/u1"), named: ".value"))
    #expect(!e.hasIndex(at: try Path("/users"), named: "height"))
    #expect(e.canRead(path: try Path("/url"), auth: nil, root: .empty, now: 0))
}
