import EmberCore
import EmberRules

/// A namespace's security rules as stored (meta `rules/<ns>`, written by `.setRules` entries):
/// the text as given and its compiled engine.
public struct StoredRules: Sendable {
    public let text: String
    public let engine: RulesEngine

    public init(text: String) throws(StorageError) {
        self.text = text
        do { engine = try RulesEngine(text: text) } catch { throw .invalidRules(line: error.line, reason: error.reason) }
    }

    static let metaPrefix = Array("rules/".utf8)
    static func metaKey(_ ns: String) -> [UInt8] { metaPrefix + Array(ns.utf8) }

    /// Every namespace's stored rules (at open, and after a snapshot replaced the state).
    static func loadAll(_ tables: Tables, _ t: Txn) throws -> [String: StoredRules] {
        var out: [String: StoredRules] = [:]
        try t.scan(tables.meta, prefix: metaPrefix) { k, v in
            let ns = String(decoding: k.dropFirst(metaPrefix.count), as: UTF8.self)
            do { out[ns] = try StoredRules(text: String(decoding: v, as: UTF8.self)) } catch {
                throw StorageError.corrupt("stored rules of \(ns): \(error)")
            }
            return true
        }
        return out
    }

    /// `.indexOn` of the rules as index definitions.
    func indexDefs() throws -> [IndexDef] {
        var defs: [IndexDef] = []
        for d in engine.indexDefinitions {
            let spec = try IndexSpec(location: "/" + d.pattern.joined(separator: "/"), indexes: d.indexes)
            for def in spec.defs where !defs.contains(def) { defs.append(def) }
        }
        guard defs.count <= IndexSpec.maxIndexesPerNamespace else {
            throw StorageError.tooManyIndexes(limit: IndexSpec.maxIndexesPerNamespace)
        }
        return defs
    }
}

/// The rules the writer judges by: stored rules per namespace, else the node's default (the
/// `--rules` file), else none (open). Writer-thread state; published to readers after commits.
struct RulesState: Sendable {
    var stored: [String: StoredRules] = [:]
    var defaultEngine: RulesEngine?

    func engine(for ns: String) -> RulesEngine? { stored[ns]?.engine ?? defaultEngine }
}

extension Applier {
    /// Whether `permits` grants a write without its values or the data: no user's write, no
    /// rules for the namespace, or rules that grant it where it lies without evaluation.
    func grantedWithoutValues(_ e: LogEntry, base: Path, paths: @autoclosure () -> [Path], isUpdate: Bool) -> Bool {
        guard case .user = e.auth, let engine = rules.engine(for: e.namespace) else { return true }
        return engine.grantsEveryWrite || engine.writeGrantedWithoutEvaluation(at: isUpdate ? paths() : [base])
    }

    /// The rules verdict on a write whose resolved parts are `parts` (absolute paths): admin
    /// entries and namespaces without rules pass; open rules pass without reading anything; data
    /// is read (in this transaction, so in log order) only where and as far as the rules look.
    /// `parts` is made only when the rules are asked (a bulk update's list of them, copied per
    /// write, was a visible share of the writer's time for admin writes, which pass at once).
    func permits(_ e: LogEntry, base: Path, parts makeParts: @autoclosure () -> [(Path, Node)], isUpdate: Bool) throws -> Bool {
        guard case .user(let auth) = e.auth, let engine = rules.engine(for: e.namespace) else { return true }
        if engine.grantsEveryWrite { return true }
        let parts = makeParts()
        let paths = parts.map(\.0)
        if engine.writeGrantedWithoutEvaluation(at: isUpdate ? paths : [base]) { return true }
        let data = StoredRulesData(tables: tables, t: t, ns: e.namespace)
        let verdict: Bool
        if isUpdate {
            let rel = parts.map { (base.relative($0.0)!, $0.1) }
            verdict = engine.canUpdate(path: base, parts: rel, auth: auth, data: data, now: e.timestamp)
        } else {
            verdict = engine.canWrite(path: base, newValue: parts.first?.1 ?? .empty, auth: auth, data: data, now: e.timestamp)
        }
        if let failure = data.failure { throw failure }
        return verdict
    }

    /// Applies a `.setRules` entry: stores the text, and makes the rules' `.indexOn` this
    /// namespace's indexes (built from the data, in this transaction).
    mutating func applyRules(_ e: LogEntry, text: String) throws {
        guard e.auth == .admin else { throw StorageError.invalid(.invalidData("Only an admin may change rules")) }
        let rules = try StoredRules(text: text)
        let ns = e.namespace
        let newDefs = try rules.indexDefs()
        let old = try defs(ns)
        for d in old where !newDefs.contains(d) { try drop(ns: ns, def: d) }
        for d in newDefs where !old.contains(d) { try build(ns: ns, def: d) }
        if newDefs.isEmpty {
            try t.delete(tables.meta, Tables.indexMetaKey(ns))
        } else {
            try t.put(tables.meta, Tables.indexMetaKey(ns), IndexDef.encodeList(newDefs))
        }
        defsCache[ns] = newDefs
        try t.put(tables.meta, StoredRules.metaKey(ns), Array(text.utf8))
        self.rules.stored[ns] = rules
    }
}
