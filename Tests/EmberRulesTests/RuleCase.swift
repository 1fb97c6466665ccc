import EmberCore
import Testing
@testable import EmberRules

/// One row of the rules table: a rules document, existing data, who asks, what they do, and
/// whether Firebase would allow it.
struct RuleCase: Sendable, CustomTestStringConvertible {
    enum Op: Sendable {
        case read(String)
        case set(String, String)                    // path, JSON value (null deletes)
        case update(String, [(String, String)])     // path, [(relative path, JSON value)]
    }

    let scenario: String
    let name: String
    let rules: String
    let data: String
    let auth: String?
    let now: Int64
    let op: Op
    let allow: Bool

    var testDescription: String { "\(scenario): \(name) → \(allow ? "allow" : "deny")" }
}

/// A row before its scenario's rules and data are attached.
struct Row: Sendable {
    let name: String
    let auth: String?
    let now: Int64
    let op: RuleCase.Op
    let allow: Bool

    static func read(_ path: String, auth: String? = nil, now: Int64 = 0, _ allow: Bool, _ name: String) -> Row {
        Row(name: name, auth: auth, now: now, op: .read(path), allow: allow)
    }

    static func set(_ path: String, _ value: String, auth: String? = nil, now: Int64 = 0, _ allow: Bool, _ name: String) -> Row {
        Row(name: name, auth: auth, now: now, op: .set(path, value), allow: allow)
    }

    static func update(_ path: String, _ parts: [(String, String)], auth: String? = nil, now: Int64 = 0, _ allow: Bool, _ name: String) -> Row {
        Row(name: name, auth: auth, now: now, op: .update(path, parts), allow: allow)
    }
}

func scenario(_ title: String, rules: String, data: String = "null", _ rows: [Row]) -> [RuleCase] {
    rows.map {
        RuleCase(scenario: title, name: $0.name, rules: rules, data: data, auth: $0.auth, now: $0.now, op: $0.op, allow: $0.allow)
    }
}

/// Runs one row against a freshly compiled engine.
func decide(_ c: RuleCase) throws -> Bool {
    let engine = try RulesEngine(text: c.rules)
    let root = try Node(json: JSON.parse(c.data))
    let auth = try c.auth.map { try JSON.parse($0) }
    switch c.op {
    case .read(let p):
        return engine.canRead(path: try Path(p), auth: auth, root: root, now: c.now)
    case .set(let p, let v):
        let path = try Path(p)
        return engine.canWrite(path: path, newValue: try Node(json: JSON.parse(v), depth: path.count),
                               auth: auth, root: root, now: c.now)
    case .update(let p, let parts):
        let path = try Path(p)
        let nodes = try parts.map { (rel, v) in
            let r = try Path(rel)
            return (r, try Node(json: JSON.parse(v), depth: path.count + r.count))
        }
        return engine.canUpdate(path: path, parts: nodes, auth: auth, root: root, now: c.now)
    }
}

@Test("Rules table", arguments: RulesTable.all)
func rulesTable(_ c: RuleCase) throws {
    #expect(try decide(c) == c.allow, "\(c.testDescription)")
}

@Test func rulesTableIsLarge() {
    #expect(RulesTable.all.count >= 60)
}
