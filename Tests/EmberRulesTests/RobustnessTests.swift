import EmberCore
import Testing
import EmberTestSupport
@testable import EmberRules

/// Random token soup must either load or be refused — never crash — and whatever loads must
/// evaluate without crashing against data of every shape.
@Test(.printsSeedOnFailure) func randomExpressionsNeverCrash() throws {
    var rng = TestSeed.generator(0x5EED)
    let atoms = ["auth", "auth.uid", "auth.token.x", "data", "newData", "root", "now", "$k", "query",
                 "'s'", "\"t\"", "1", "2.5", "true", "false", "null", "[", "]", "(", ")", ".", ",",
                 "val()", "child('a')", "parent()", "exists()", "hasChild('a')", "hasChildren(['a'])",
                 "hasChildren()", "getPriority()", "isNumber()", "isString()", "isBoolean()", "length",
                 "contains('a')", "beginsWith('a')", "endsWith('a')", "replace('a','b')", "toLowerCase()",
                 "matches(/a+/i)", "matches(", "/", "/x/", "+", "-", "*", "%", "==", "!==", "<", ">=",
                 "&&", "||", "!", "?", ":", "'unterminated", "@"]
    let data = try Node(json: JSON.parse(#"{"k": {"a": 1, "b": "x", "c": {"d": true}}, "n": 5}"#))
    let auth: JSON = .object(["uid": .string("u"), "token": .object(["x": .int(1)])])
    var loaded = 0
    for _ in 0..<1000 {
        let expr: String
        if rng.next() % 2 == 0 {
            let n = 1 + rng.next() % 8
            var parts: [String] = []
            for _ in 0..<n { parts.append(atoms[Int(rng.next() % UInt64(atoms.count))]) }
            expr = parts.joined(separator: rng.next() % 2 == 0 ? "" : " ")
        } else {
            expr = wellFormed(&rng, depth: 3)
        }
        for kind in [".read", ".write", ".validate"] {
            let doc = JSON.object(["rules": .object(["$k": .object([kind: .string(expr)])])]).serialized()
            guard let engine = try? RulesEngine(text: doc) else { continue }
            loaded += 1
            let path = try Path("/k")
            _ = engine.canRead(path: path, auth: auth, root: data, now: 1)
            _ = engine.canWrite(path: path, newValue: data, auth: nil, root: data, now: 1)
            _ = engine.canUpdate(path: path, parts: [(try Path("a"), .empty)], auth: auth, root: .empty, now: 1)
        }
    }
    #expect(loaded > 300)  // the soup is not all rejected: evaluation really ran
}

/// A grammatical (not necessarily well-typed) expression.
func wellFormed(_ rng: inout SplitMix64, depth: Int) -> String {
    func pick(_ xs: [String]) -> String { xs[Int(rng.next() % UInt64(xs.count))] }
    let snaps = ["data", "newData", "root", "data.child('k')", "root.child($k)", "newData.parent()"]
    let leaves = ["auth.uid", "auth.token.x", "now", "$k", "'k'", "1", "0", "true", "null",
                  pick(snaps) + ".val()", pick(snaps) + ".exists()", pick(snaps) + ".hasChildren(['a', 'b'])",
                  pick(snaps) + ".isNumber()", pick(snaps) + ".getPriority()", pick(snaps) + ".child('a').val()",
                  pick(snaps) + ".val().b", pick(snaps) + ".val()['c']"]
    if depth == 0 || rng.next() % 3 == 0 { return pick(leaves) }
    let a = wellFormed(&rng, depth: depth - 1), b = wellFormed(&rng, depth: depth - 1)
    switch rng.next() % 6 {
    case 0: return "(\(a) \(pick(["+", "-", "*", "/", "%"])) \(b))"
    case 1: return "(\(a) \(pick(["==", "!=", "===", "<", ">="])) \(b))"
    case 2: return "(\(a) \(pick(["&&", "||"])) \(b))"
    case 3: return "!\(a)"
    case 4: return "(\(a) ? \(b) : \(wellFormed(&rng, depth: depth - 1)))"
    default: return "\(a).\(pick(["contains('a')", "toUpperCase()", "length", "matches(/^[a-z]+$/)", "replace('1', '2')"]))"
    }
}

