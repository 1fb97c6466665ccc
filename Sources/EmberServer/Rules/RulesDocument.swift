import EmberCore
import EmberRules

/// A Firebase rules document `{"rules": {...}}`: its text, its compiled engine (EmberRules:
/// parsed and type-checked, errors name the line) and its `.indexOn`. Comments (`//`, `/* */`)
/// are allowed as firebase-tools uploads them.
public struct RulesDocument: Sendable, Equatable {
    public let text: String
    public let source: JSON
    public let indexes: [IndexDefinition]
    public let engine: RulesEngine

    public static let open = try! RulesDocument(text: #"{"rules": {".read": true, ".write": true}}"#)

    public static func == (a: RulesDocument, b: RulesDocument) -> Bool { a.text == b.text }

    public init(text: String) throws(RestError) {
        do { engine = try RulesEngine(text: text) } catch {
            throw .badRequest("Rules refused: line \(error.line): \(error.reason)")
        }
        self.text = text
        let stripped = RulesDocument.stripComments(text)
        let json: JSON
        do { json = try JSON.parse(stripped) } catch {
            throw .badRequest("Rules do not parse: \(error.description)")
        }
        guard case .object(let top) = json, case .object(let rules)? = top["rules"] else {
            throw .badRequest("Rules must be an object with a \"rules\" member")
        }
        var defs: [IndexDefinition] = []
        try RulesDocument.collectIndexes(rules, at: [], into: &defs)
        self.source = json
        self.indexes = defs
    }

    static func collectIndexes(_ obj: KeyMap<JSON>, at pattern: [String], into defs: inout [IndexDefinition]) throws(RestError) {
        for (key, value) in obj {
            if key == ".indexOn" {
                var names: [String] = []
                switch value {
                case .string(let s): names = [s]
                case .array(let a):
                    for v in a {
                        guard let s = v.stringValue else { throw .badRequest(".indexOn must hold strings at /\(pattern.joined(separator: "/"))") }
                        names.append(s)
                    }
                default: throw .badRequest(".indexOn must be a string or an array of strings at /\(pattern.joined(separator: "/"))")
                }
                for n in names where n != ".value" {
                    guard (try? Path(n)).map({ !$0.isRoot }) == true else {
                        throw .badRequest("Invalid .indexOn entry \"\(n)\" at /\(pattern.joined(separator: "/"))")
                    }
                }
                defs.append(IndexDefinition(pattern: pattern, indexes: names))
            } else if key.hasPrefix(".") {
                continue
            } else if case .object(let child) = value {
                guard key.hasPrefix("$") || Key.isValid(key) else {
                    throw .badRequest("Invalid key \"\(key)\" in rules")
                }
                try collectIndexes(child, at: pattern + [key], into: &defs)
            }
        }
    }

    /// Whether `.indexOn` at a location matching `path` names `index` (`.value` for $value).
    public func hasIndex(at path: Path, named index: String) -> Bool {
        indexes.contains { def in
            def.pattern.count == path.count
                && zip(def.pattern, path.segments).allSatisfy { $0.hasPrefix("$") || $0.isExactly($1) }
                && def.indexes.contains(index)
        }
    }

    static func stripComments(_ text: String) -> String {
        var out: [UInt8] = []
        let b = Array(text.utf8)
        var i = 0
        var inString = false
        while i < b.count {
            let c = b[i]
            if inString {
                out.append(c)
                if c == UInt8(ascii: "\\"), i + 1 < b.count { out.append(b[i + 1]); i += 2; continue }
                if c == UInt8(ascii: "\"") { inString = false }
                i += 1
            } else if c == UInt8(ascii: "\"") {
                inString = true; out.append(c); i += 1
            } else if c == UInt8(ascii: "/"), i + 1 < b.count, b[i + 1] == UInt8(ascii: "/") {
                while i < b.count && b[i] != 0x0A { i += 1 }
            } else if c == UInt8(ascii: "/"), i + 1 < b.count, b[i + 1] == UInt8(ascii: "*") {
                i += 2
                while i + 1 < b.count && !(b[i] == UInt8(ascii: "*") && b[i + 1] == UInt8(ascii: "/")) { i += 1 }
                i += 2
            } else {
                out.append(c); i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
