import EmberCore
import Testing
@testable import EmberRules

/// The verdicts stores take without evaluating (`readVerdictWithoutEvaluation`,
/// `writeGrantedWithoutEvaluation`) must be the verdicts a full evaluation reaches. Every row of
/// the rules table that a shortcut decides is checked against its expected verdict, and the
/// table must exercise each shortcut (a soundness check over no rows would prove nothing).
@Test func shortcutsAgreeWithEvaluationOnTheRulesTable() throws {
    var readShortcuts = 0, deniedReadShortcuts = 0, writeShortcuts = 0
    for c in RulesTable.all {
        let engine = try RulesEngine(text: c.rules)
        switch c.op {
        case .read(let p):
            guard let verdict = engine.readVerdictWithoutEvaluation(at: try Path(p)) else { continue }
            #expect(verdict == c.allow, "\(c.testDescription)")
            readShortcuts += 1
            if !verdict { deniedReadShortcuts += 1 }
        case .set(let p, _):
            guard engine.writeGrantedWithoutEvaluation(at: [try Path(p)]) else { continue }
            #expect(c.allow, "\(c.testDescription)")
            writeShortcuts += 1
        case .update(let p, let parts):
            let base = try Path(p)
            let paths = try parts.map { base.appending(try Path($0.0)) }
            guard !paths.isEmpty, engine.writeGrantedWithoutEvaluation(at: paths) else { continue }
            #expect(c.allow, "\(c.testDescription)")
            writeShortcuts += 1
        }
    }
    #expect(readShortcuts >= 5 && deniedReadShortcuts >= 1 && writeShortcuts >= 2,
            "reads \(readShortcuts) (denied \(deniedReadShortcuts)), writes \(writeShortcuts)")
}

@Test func shortcutsStepAsideWhenRulesLook() throws {
    let e = try RulesEngine(text: #"""
        {"rules": {".read": false,
                   "open": {".read": true, ".write": true},
                   "v": {".write": true, "n": {".validate": "newData.isNumber()"}},
                   "u": {"$uid": {".read": "auth.uid === $uid", ".write": "auth.uid === $uid"}}}}
        """#)
    #expect(e.readVerdictWithoutEvaluation(at: try Path("/open/x")) == true)
    #expect(e.readVerdictWithoutEvaluation(at: try Path("/closed")) == false)
    #expect(e.readVerdictWithoutEvaluation(at: try Path("/u/a")) == nil)
    #expect(e.writeGrantedWithoutEvaluation(at: [try Path("/open/x/y")]))
    // A .validate below the write location must run, so does one on the way down.
    #expect(!e.writeGrantedWithoutEvaluation(at: [try Path("/v")]))
    #expect(!e.writeGrantedWithoutEvaluation(at: [try Path("/v/n")]))
    #expect(!e.writeGrantedWithoutEvaluation(at: [try Path("/u/a")]))
    #expect(!e.writeGrantedWithoutEvaluation(at: [try Path("/open/x"), try Path("/u/a")]))
}

/// `grantsEveryWrite` (checked per write before any path is built) holds exactly for rules that
/// grant every write at the root with no `.validate` anywhere, and then the walk agrees.
@Test func everyWriteGrantedOnlyUnderOpenRulesWithoutValidation() throws {
    let open = try RulesEngine(text: #"{"rules": {".read": true, ".write": true}}"#)
    #expect(open.grantsEveryWrite)
    #expect(open.writeGrantedWithoutEvaluation(at: [.root, try Path("/a/b/c"), try Path("/x")]))
    #expect(try RulesEngine(text: #"{"rules": {".write": true, "a": {".read": "auth != null"}}}"#).grantsEveryWrite)
    let validated = try RulesEngine(text: #"{"rules": {".write": true, "a": {"$k": {"b": {".validate": "newData.isNumber()"}}}}}"#)
    #expect(!validated.grantsEveryWrite)
    #expect(!validated.writeGrantedWithoutEvaluation(at: [try Path("/a/k/b")]))
    #expect(validated.writeGrantedWithoutEvaluation(at: [try Path("/z")]))
    #expect(try !RulesEngine(text: #"{"rules": {".write": "auth != null"}}"#).grantsEveryWrite)
    #expect(try !RulesEngine(text: #"{"rules": {"open": {".write": true}}}"#).grantsEveryWrite)
    #expect(try !RulesEngine(text: #"{"rules": {".write": false}}"#).grantsEveryWrite)
}
