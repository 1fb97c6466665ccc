import EmberCore
import Testing
@testable import EmberRules

/// The whole rules table again, as a store decides: constant verdicts without evaluation, and
/// otherwise a root holding only the subtrees `readDataScope`/`writeDataScope` name. Every row
/// must reach the verdict it reaches with the whole tree.
@Test("Rules table with scoped data", arguments: RulesTable.all)
func rulesTableWithScopedData(_ c: RuleCase) throws {
    let engine = try RulesEngine(text: c.rules)
    let full = try Node(json: JSON.parse(c.data))
    let auth = try c.auth.map { try JSON.parse($0) }
    func scoped(_ scope: [Path]) -> Node { RulesEngine.partialRoot(scope) { full.child(at: $0) } }
    switch c.op {
    case .read(let p):
        let path = try Path(p)
        if let verdict = engine.readVerdictWithoutEvaluation(at: path) {
            #expect(verdict == c.allow, "\(c.testDescription)")
            return
        }
        let root = scoped(engine.readDataScope(at: path, auth: auth, now: c.now))
        #expect(engine.canRead(path: path, auth: auth, root: root, now: c.now) == c.allow, "\(c.testDescription)")
    case .set(let p, let v):
        let path = try Path(p)
        if engine.writeGrantedWithoutEvaluation(at: [path]) {
            #expect(c.allow, "\(c.testDescription)")
            return
        }
        let root = scoped(engine.writeDataScope(at: [path], auth: auth, now: c.now))
        let node = try Node(json: JSON.parse(v), depth: path.count)
        #expect(engine.canWrite(path: path, newValue: node, auth: auth, root: root, now: c.now) == c.allow, "\(c.testDescription)")
    case .update(let p, let parts):
        let path = try Path(p)
        let nodes = try parts.map { (rel, v) in
            let r = try Path(rel)
            return (r, try Node(json: JSON.parse(v), depth: path.count + r.count))
        }
        let abs = nodes.map { path.appending($0.0) }
        if !abs.isEmpty && engine.writeGrantedWithoutEvaluation(at: abs) {
            #expect(c.allow, "\(c.testDescription)")
            return
        }
        let root = scoped(engine.writeDataScope(at: abs.isEmpty ? [path] : abs, auth: auth, now: c.now))
        #expect(engine.canUpdate(path: path, parts: nodes, auth: auth, root: root, now: c.now) == c.allow, "\(c.testDescription)")
    }
}
