import EmberCore
import Testing
@testable import EmberRules

/// The named bounds: expression length, nesting, regex length, and evaluation steps.
struct LimitTests {
    func rules(_ read: String) -> String { #"{"rules": {".read": "\#(read)"}}"# }

    func refusal(_ text: String, limits: RulesLimits = .default) -> RulesError? {
        do { _ = try RulesEngine(text: text, limits: limits); return nil } catch { return error }
    }

    @Test func expressionLengthLimit() throws {
        var limits = RulesLimits()
        limits.maxExpressionLength = 20
        #expect(refusal(rules("true && true && true"), limits: limits) == nil)  // exactly 20 bytes
        let e = refusal(rules("true && true && true "), limits: limits)
        #expect(e?.reason.contains("the limit is 20") == true)
        // The default limit refuses a huge expression outright.
        let huge = Array(repeating: "true", count: 2000).joined(separator: " && ")
        #expect(refusal(rules(huge))?.reason.contains("bytes long") == true)
    }

    @Test func nestingLimit() throws {
        let ok = String(repeating: "(", count: 100) + "true" + String(repeating: ")", count: 100)
        #expect(refusal(rules(ok)) == nil)
        let deep = String(repeating: "(", count: 500) + "true" + String(repeating: ")", count: 500)
        #expect(refusal(rules(deep))?.reason.contains("levels deep") == true)
        let nots = String(repeating: "!", count: 300) + "true"
        #expect(refusal(rules(nots))?.reason.contains("levels deep") == true)
        // A flat chain is built by a loop but still makes a deep tree: bounded too.
        let chain = Array(repeating: "1", count: 400).joined(separator: "+") + " > 0"
        #expect(refusal(rules(chain))?.reason.contains("levels deep") == true)
        let members = "auth" + String(repeating: ".a", count: 300) + " == 1"
        #expect(refusal(rules(members))?.reason.contains("levels deep") == true)
    }

    @Test func regexLengthLimit() throws {
        var limits = RulesLimits()
        limits.maxRegexLength = 8
        let ok = #"{"rules": {"$k": {".read": "$k.matches(/^[a-z]+$/)"}}}"#
        #expect(refusal(ok, limits: limits) == nil)
        let long = #"{"rules": {"$k": {".read": "$k.matches(/^[a-z]+[0-9]$/)"}}}"#
        #expect(refusal(long, limits: limits)?.reason.contains("the limit is 8") == true)
    }

    @Test func evaluationStepLimit() throws {
        // 1 + 1 + … + 1 == 20 takes about 40 steps.
        let expr = Array(repeating: "1", count: 20).joined(separator: " + ") + " == 20"
        let unlimited = try RulesEngine(text: rules(expr))
        #expect(unlimited.canRead(path: .root, auth: nil, root: .empty, now: 0))
        var limits = RulesLimits()
        limits.maxEvaluationSteps = 30
        let limited = try RulesEngine(text: rules(expr), limits: limits)
        #expect(!limited.canRead(path: .root, auth: nil, root: .empty, now: 0))
        // A short rule still fits the same per-expression limit.
        let short = try RulesEngine(text: rules("1 + 1 == 2"), limits: limits)
        #expect(short.canRead(path: .root, auth: nil, root: .empty, now: 0))
    }

    @Test func stringWorkCountsTowardSteps() throws {
        let text = #"{"rules": {"s": {".write": "newData.val().toUpperCase().contains('X')"}}}"#
        var limits = RulesLimits()
        limits.maxEvaluationSteps = 50
        let engine = try RulesEngine(text: text, limits: limits)
        let path = try Path("/s")
        let small = Node(.string("x" + String(repeating: "a", count: 10_000)))
        let big = Node(.string("x" + String(repeating: "a", count: 100_000)))
        #expect(engine.canWrite(path: path, newValue: small, auth: nil, root: .empty, now: 0))
        #expect(!engine.canWrite(path: path, newValue: big, auth: nil, root: .empty, now: 0))
    }

    @Test func operationStepLimit() throws {
        let text = #"{"rules": {".write": true, "items": {"$id": {".validate": "newData.isNumber()"}}}}"#
        var items: KeyMap<JSON> = [:]
        for i in 0..<100 { items["k\(i)"] = .int(Int64(i)) }
        let value = try Node(json: .object(items))
        let path = try Path("/items")
        #expect(try RulesEngine(text: text).canWrite(path: path, newValue: value, auth: nil, root: .empty, now: 0))
        var limits = RulesLimits()
        limits.maxOperationSteps = 150  // 3 steps per item: not enough for 100 items
        let limited = try RulesEngine(text: text, limits: limits)
        #expect(!limited.canWrite(path: path, newValue: value, auth: nil, root: .empty, now: 0))
        // Unchanged children are not re-validated, so re-writing the same data costs nothing.
        #expect(limited.canWrite(path: path, newValue: value, auth: nil, root: Node.empty.setting(value, at: path), now: 0))
    }

    @Test func rulesDocumentNestingLimit() throws {
        let deep = String(repeating: #"{"a": "#, count: 100) + "{}" + String(repeating: "}", count: 100)
        #expect(refusal(#"{"rules": \#(deep)}"#)?.reason.contains("nested too deeply") == true)
    }
}
