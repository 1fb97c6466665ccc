import EmberCore

/// Turns a rules document into a `RuleNode` tree, compiling and type-checking every condition.
/// Every refusal names the line of the offending member in the rules text.
struct RulesLoader {
    let limits: RulesLimits

    func load(_ text: String) throws(RulesError) -> RuleNode {
        let doc = try RulesJSON.parse(text)
        guard case .object(let top, _) = doc else {
            throw RulesError(line: doc.line, reason: "a rules document must be an object {\"rules\": {...}}")
        }
        var rules: RulesJSON?
        for m in top {
            guard m.key == "rules" else {
                throw RulesError(line: m.keyLine, reason: "unknown top-level key \"\(m.key)\" (only \"rules\" is allowed)")
            }
            rules = m.value
        }
        guard let rules else { throw RulesError(line: doc.line, reason: "missing \"rules\" member") }
        return try node(rules, pattern: [], captures: [])
    }

    private func node(_ json: RulesJSON, pattern: [String], captures: [String]) throws(RulesError) -> RuleNode {
        guard case .object(let members, _) = json else {
            throw RulesError(line: json.line, reason: "rules at \(where_(pattern)) must be an object, not \(json.kindName)")
        }
        var read: Condition?, write: Condition?, validate: Condition?
        var indexOn: [String] = []
        var children: KeyMap<RuleNode> = [:]
        var wildcard: (name: String, node: RuleNode)?
        for m in members {
            switch m.key {
            case ".read": read = try condition(m.value, kind: .read, captures: captures)
            case ".write": write = try condition(m.value, kind: .write, captures: captures)
            case ".validate": validate = try condition(m.value, kind: .validate, captures: captures)
            case ".indexOn": indexOn = try indexes(m.value, pattern: pattern)
            default:
                if m.key.hasPrefix(".") {
                    throw RulesError(line: m.keyLine, reason: "unknown rule \"\(m.key)\" at \(where_(pattern))")
                }
                if m.key.hasPrefix("$") {
                    let name = m.key
                    guard name.count > 1, name.utf8.dropFirst().allSatisfy(Lexer.isIdentPart),
                          !Lexer.isDigit(name.utf8[name.utf8.index(after: name.utf8.startIndex)]) else {
                        throw RulesError(line: m.keyLine, reason: "invalid wildcard name \"\(name)\"")
                    }
                    if let w = wildcard {
                        throw RulesError(line: m.keyLine, reason: "two wildcards at \(where_(pattern)): \(w.name) and \(name)")
                    }
                    guard !captures.contains(name) else {
                        throw RulesError(line: m.keyLine, reason: "wildcard \(name) is already used by an enclosing location")
                    }
                    wildcard = (name, try node(m.value, pattern: pattern + [name], captures: captures + [name]))
                } else {
                    guard Key.isValid(m.key) else {
                        throw RulesError(line: m.keyLine, reason: "invalid key \"\(m.key)\" in rules")
                    }
                    children[m.key] = try node(m.value, pattern: pattern + [m.key], captures: captures)
                }
            }
        }
        return RuleNode(read: read, write: write, validate: validate, indexOn: indexOn, children: children, wildcard: wildcard)
    }

    private func where_(_ pattern: [String]) -> String { "/" + pattern.joined(separator: "/") }

    private func condition(_ json: RulesJSON, kind: RuleKind, captures: [String]) throws(RulesError) -> Condition {
        switch json {
        case .bool(let b, _): return .constant(b)
        case .string(let source, let line):
            let expr: Expr
            do { expr = try Parser.parse(source, limits: limits) } catch {
                throw RulesError(line: line, reason: "\(kind.rawValue): syntax error at column \(error.offset + 1): \(error.message) in \"\(source)\"")
            }
            do { try TypeChecker(kind: kind, captures: Set(captures)).checkCondition(expr) } catch {
                throw RulesError(line: line, reason: "\(kind.rawValue): type error at column \(error.offset + 1): \(error.message) in \"\(source)\"")
            }
            return .expression(expr, source: source)
        default:
            throw RulesError(line: json.line, reason: "\(kind.rawValue) must be a boolean or an expression string, not \(json.kindName)")
        }
    }

    private func indexes(_ json: RulesJSON, pattern: [String]) throws(RulesError) -> [String] {
        var names: [String] = []
        switch json {
        case .string(let s, _): names = [s]
        case .array(let items, _):
            for item in items {
                guard case .string(let s, _) = item else {
                    throw RulesError(line: item.line, reason: ".indexOn entries must be strings")
                }
                names.append(s)
            }
        default:
            throw RulesError(line: json.line, reason: ".indexOn must be a string or an array of strings")
        }
        for n in names where n != ".value" {
            guard (try? Path(n)).map({ !$0.isRoot }) == true else {
                throw RulesError(line: json.line, reason: "invalid .indexOn entry \"\(n)\" at \(where_(pattern))")
            }
        }
        return names
    }
}
