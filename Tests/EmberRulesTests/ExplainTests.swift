import EmberCore
import Testing
@testable import EmberRules

/// The Rules Playground's explanations: the same verdicts as canRead/canWrite/canUpdate, with the
/// rule that decided each one.
private let rules = """
{"rules": {
  ".read": false,
  "users": {
    "$uid": {
      ".read": "auth != null && auth.uid === $uid",
      ".write": "auth != null && auth.uid === $uid",
      "age": {".validate": "newData.isNumber() && newData.val() >= 0"}
    }
  },
  "public": {".read": true}
}}
"""

private func p(_ s: String) -> Path { try! Path(s) }
private var data: NodeDataSource { NodeDataSource(Node(children: ["users": Node(children: ["alice": Node(children: ["age": Node(.int(30))])])])) }
private let alice: JSON = .object(["uid": .string("alice")])

@Test func readGrantedNamesTheGrantingRuleAndItsLocation() throws {
    let e = try RulesEngine(text: rules)
    let d = e.explainRead(path: p("users/alice/age"), auth: alice, data: data, now: 0)
    #expect(d.allowed)
    #expect(d.decidedBy?.kind == ".read")
    #expect(d.decidedBy?.location == "/users/$uid")
    #expect(d.decidedBy?.rule == "auth != null && auth.uid === $uid")
    #expect(d.decidedBy?.path == p("users/alice"))
    // The root's false .read was evaluated first.
    #expect(d.steps.first?.rule == "false" && d.steps.first?.result == false)
    #expect(d.allowed == e.canRead(path: p("users/alice/age"), auth: alice, data: data, now: 0))
}

@Test func readDeniedHasNoDecidingRule() throws {
    let e = try RulesEngine(text: rules)
    let d = e.explainRead(path: p("users/alice"), auth: .object(["uid": .string("bob")]), data: data, now: 0)
    #expect(!d.allowed)
    #expect(d.decidedBy == nil)
    #expect(d.steps.count == 2 && d.steps.allSatisfy { !$0.result })
    #expect(d.reason.hasPrefix("Denied: no .read rule"))
}

@Test func writeDeniedByValidateNamesTheValidateRule() throws {
    let e = try RulesEngine(text: rules)
    let d = e.explainWrite(path: p("users/alice/age"), newValue: Node(.int(-1)), auth: alice, data: data, now: 0)
    #expect(!d.allowed)
    #expect(d.decidedBy?.kind == ".validate")
    #expect(d.decidedBy?.location == "/users/$uid/age")
    #expect(d.reason == "Denied by .validate at /users/$uid/age: newData.isNumber() && newData.val() >= 0 is false")
    #expect(!e.canWrite(path: p("users/alice/age"), newValue: Node(.int(-1)), auth: alice, data: data, now: 0))
}

@Test func writeAllowedNamesTheGrantEvenAfterValidatesPass() throws {
    let e = try RulesEngine(text: rules)
    let d = e.explainWrite(path: p("users/alice/age"), newValue: Node(.int(31)), auth: alice, data: data, now: 0)
    #expect(d.allowed)
    #expect(d.decidedBy?.kind == ".write")
    #expect(d.steps.contains { $0.kind == ".validate" && $0.result })
}

@Test func updateNeedsEveryPartAndMatchesCanUpdate() throws {
    let e = try RulesEngine(text: rules)
    let parts: [(Path, Node)] = [(p("alice/age"), Node(.int(5))), (p("bob/age"), Node(.int(5)))]
    let d = e.explainUpdate(path: p("users"), parts: parts, auth: alice, data: data, now: 0)
    #expect(!d.allowed && d.decidedBy == nil)
    #expect(d.allowed == e.canUpdate(path: p("users"), parts: parts, auth: alice, data: data, now: 0))
    let own = e.explainUpdate(path: p("users"), parts: [(p("alice/age"), Node(.int(5)))], auth: alice, data: data, now: 0)
    #expect(own.allowed && own.decidedBy?.location == "/users/$uid")
}
