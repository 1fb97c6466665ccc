import EmberSyncTree
import EmberCore
import Foundation

/// Loads and runs the Firebase SDKs' `syncPointSpec.json` against `SyncTree`, following the rules in
/// `shared/conformance/README.md` (§3, §4, §3.8).
enum SyncPointSpec {
    struct Case: Sendable {
        var name: String
        var steps: [JSON]
    }

    static let specURL: URL = {
        // Tests/EmberSyncTreeTests/<file> → package root → the nearest ancestor's shared/conformance/
        // (../shared for a checkout at /work/main, ../../shared for a worktree at /work/wt/NAME).
        var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        for _ in 0..<4 {
            dir = dir.deletingLastPathComponent()
            let candidate = dir.appendingPathComponent("shared/conformance/syncPointSpec.json")
            if FileManager.default.fileExists(atPath: candidate.path) { return candidate }
        }
        return dir.appendingPathComponent("shared/conformance/syncPointSpec.json")
    }()

    static let cases: [Case] = {
        guard let data = try? Data(contentsOf: specURL) else { return [] }
        guard case .array(let items)? = try? JSON.parse(Array(data)) else { return [] }
        return items.map { item in
            guard case .array(let steps)? = item["steps"] else { return Case(name: item["name"]?.stringValue ?? "?", steps: []) }
            return Case(name: item["name"]!.stringValue!, steps: steps)
        }
    }()

    static let caseNames: [String] = cases.map(\.name)

    static func named(_ name: String) -> Case? { cases.first { $0.name == name } }
}

/// The fake listen provider: asserts no listen starts twice or stops without having started.
final class FakeListenProvider: ListenProvider {
    struct Listen: Hashable { var query: SyncQuery; var tag: Int? }
    private(set) var active: Set<Listen> = []
    private(set) var errors: [String] = []
    private(set) var log: [String] = []

    func startListening(_ query: SyncQuery, tag: Int?) {
        let l = Listen(query: query, tag: tag)
        log.append("start \(query) tag=\(tag.map(String.init) ?? "nil")")
        if active.contains(l) { errors.append("listen started twice: \(query) tag \(String(describing: tag))") }
        active.insert(l)
    }

    func stopListening(_ query: SyncQuery, tag: Int?) {
        let l = Listen(query: query, tag: tag)
        log.append("stop \(query) tag=\(tag.map(String.init) ?? "nil")")
        if active.remove(l) == nil { errors.append("stopped a listen never started: \(query) tag \(String(describing: tag))") }
    }
}

/// One expected event from the spec, normalised.
struct ExpectedEvent: CustomStringConvertible {
    var type: EventType
    var path: Path
    var name: String?
    var prevName: String?
    var node: Node

    func matches(_ e: Event) -> Bool {
        guard e.type == type else { return false }
        if type != .value {
            guard e.childKey == name else { return false }
            if type != .childRemoved && e.prevName != prevName { return false }
        }
        return e.node == node
    }

    var description: String {
        var s = "\(type) @\(path)"
        if let name { s += " \(name)" }
        if type != .value && type != .childRemoved { s += " prev=\(prevName ?? "nil")" }
        return s + " " + node.exportJSON().serialized()
    }
}

struct SpecFailure: Error, CustomStringConvertible {
    var description: String
}

/// Runs one spec case at one base path. Throws a description of the first mismatch.
struct SyncPointSpecRun {
    let basePath: [String]
    let provider = FakeListenProvider()
    let tree: SyncTree
    var writeId = 0
    var nextRegistration = 1
    var callbacks: [Int: RegistrationID] = [:]
    var specTagToQuery: [Int: SyncQuery] = [:]
    /// Number of expected events matched so far (guards against a vacuous runner).
    var matchedEvents = 0

    init(basePath: String) {
        self.basePath = basePath.split(separator: "/").map(String.init)
        tree = SyncTree(listenProvider: provider)
    }

    func path(_ json: JSON?) -> Path {
        let parts = (json?.stringValue ?? "").split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        return Path(validated: basePath + parts)
    }

    static func relPath(_ s: String) -> Path {
        Path(validated: s.split(separator: "/", omittingEmptySubsequences: true).map(String.init))
    }

    static func node(_ json: JSON?) throws -> Node {
        try Node(json: json ?? .null)
    }

    static func mergeChildren(_ json: JSON?) throws -> [(Path, Node)] {
        guard case .object(let obj)? = json else { throw SpecFailure(description: "merge data must be an object") }
        return try obj.keys.sorted().map { (relPath($0), try node(obj[$0])) }
    }

    static func spec(from params: JSON) throws -> QuerySpec {
        var spec = QuerySpec()
        if let by = params["orderBy"]?.stringValue { spec.index = .child(relPath(by)) }
        if case .bool(true)? = params["orderByKey"] { spec.index = .key }
        if case .bool(true)? = params["orderByPriority"] { spec.index = .priority }
        func bound(_ key: String) throws -> (IndexValue, String?)? {
            guard let b = params[key] else { return nil }
            guard let v = IndexValue(json: b["index"] ?? .null) else { throw SpecFailure(description: "bad bound \(key)") }
            return (v, b["name"]?.stringValue)
        }
        if let (v, k) = try bound("startAt") { spec = spec.starting(at: v, key: k) }
        if let (v, k) = try bound("startAfter") { spec = spec.starting(after: v, key: k) }
        if let (v, k) = try bound("endAt") { spec = spec.ending(at: v, key: k) }
        if let (v, k) = try bound("endBefore") { spec = spec.ending(before: v, key: k) }
        if let (v, k) = try bound("equalTo") { spec = spec.equal(to: v, key: k) }
        if case .int(let n)? = params["limitToFirst"] { spec = spec.limited(toFirst: Int(n)) }
        if case .int(let n)? = params["limitToLast"] { spec = spec.limited(toLast: Int(n)) }
        return spec
    }

    func expectedEvents(_ json: JSON?) throws -> [ExpectedEvent] {
        guard case .array(let items)? = json else { return [] }
        return try items.map { e in
            let type: EventType
            switch e["type"]?.stringValue {
            case "child_added": type = .childAdded
            case "child_removed": type = .childRemoved
            case "child_changed": type = .childChanged
            case "child_moved": type = .childMoved
            case "value": type = .value
            default: throw SpecFailure(description: "unknown event type")
            }
            return ExpectedEvent(type: type, path: path(e["path"]), name: type == .value ? nil : e["name"]?.stringValue,
                                 prevName: e["prevName"]?.stringValue, node: try Self.node(e["data"]))
        }
    }

    mutating func runAll(_ steps: [JSON]) throws {
        for (i, step) in steps.enumerated() {
            do {
                try run(step)
            } catch let f as SpecFailure {
                throw SpecFailure(description: "step \(i) (\(step["type"]?.stringValue ?? "?")): \(f.description)")
            }
            if !provider.errors.isEmpty {
                throw SpecFailure(description: "step \(i): listen provider: \(provider.errors)")
            }
        }
    }

    mutating func run(_ step: JSON) throws {
        let expected = try expectedEvents(step["events"])
        let actual: [Event]
        switch step["type"]?.stringValue {
        case "listen":
            var spec = QuerySpec.default
            if let params = step["params"] { spec = try Self.spec(from: params) }
            let query = SyncQuery(path: path(step["path"]), spec: spec)
            let reg: RegistrationID
            if case .int(let cb)? = step["callbackId"] {
                reg = callbacks[Int(cb)] ?? RegistrationID(nextRegistration)
                if callbacks[Int(cb)] == nil { nextRegistration += 1 }
                callbacks[Int(cb)] = reg
            } else {
                reg = RegistrationID(nextRegistration)
                nextRegistration += 1
            }
            actual = tree.addEventRegistration(query, reg)
            if let params = step["params"], case .int(let specTag)? = params["tag"] {
                specTagToQuery[Int(specTag)] = query
                if !spec.loadsAllData, tree.tag(for: query) != Int(specTag) {
                    throw SpecFailure(description: "client tag \(String(describing: tree.tag(for: query))) != spec tag \(specTag)")
                }
            }
            try compareExact(expected, actual)
            matchedEvents += expected.count
            return
        case "unlisten":
            guard case .int(let cb)? = step["callbackId"], let reg = callbacks[Int(cb)] else {
                throw SpecFailure(description: "unlisten without a known callbackId")
            }
            actual = tree.removeEventRegistration(SyncQuery(path: path(step["path"])), reg)
            try compareExact(expected, actual)
        case "serverUpdate":
            let p = path(step["path"])
            let node = try Self.node(step["data"])
            if case .int(let t)? = step["tag"] {
                actual = tree.applyTaggedQueryOverwrite(p, node, tag: clientTag(Int(t)))
            } else {
                actual = tree.applyServerOverwrite(p, node)
            }
            try compareGrouped(expected, actual)
        case "serverMerge":
            let p = path(step["path"])
            let children = try Self.mergeChildren(step["data"])
            if case .int(let t)? = step["tag"] {
                actual = tree.applyTaggedQueryMerge(p, children, tag: clientTag(Int(t)))
            } else {
                actual = tree.applyServerMerge(p, children)
            }
            try compareGrouped(expected, actual)
        case "set":
            var visible = true
            if case .bool(let v)? = step["visible"] { visible = v }
            actual = tree.applyUserOverwrite(path(step["path"]), try Self.node(step["data"]), writeId: writeId, visible: visible)
            writeId += 1
            try compareGrouped(expected, actual)
        case "update":
            actual = tree.applyUserMerge(path(step["path"]), try Self.mergeChildren(step["data"]), writeId: writeId)
            writeId += 1
            try compareGrouped(expected, actual)
        case "ackUserWrite":
            guard case .int(let id)? = step["writeId"] else { throw SpecFailure(description: "ack without writeId") }
            var revert = false
            if case .bool(let r)? = step["revert"] { revert = r }
            actual = tree.ackUserWrite(Int(id), revert: revert)
            try compareGrouped(expected, actual)
        case "suppressWarning":
            return
        default:
            throw SpecFailure(description: "unknown step type")
        }
        matchedEvents += expected.count
    }

    /// The client's tag for the query the spec tagged `specTag` (unknown tags pass through).
    func clientTag(_ specTag: Int) -> Int {
        guard let q = specTagToQuery[specTag], let t = tree.tag(for: q) else { return specTag }
        return t
    }

    func listing(_ expected: [ExpectedEvent], _ actual: [Event]) -> String {
        "\n  expected: \(expected.map(\.description))\n  actual:   \(actual.map(\.description))"
    }

    /// Listen/unlisten steps: same length, position by position (and the listener path).
    func compareExact(_ expected: [ExpectedEvent], _ actual: [Event]) throws {
        guard expected.count == actual.count else {
            throw SpecFailure(description: "event count \(actual.count) != \(expected.count)" + listing(expected, actual))
        }
        for (e, a) in zip(expected, actual) where !e.matches(a) || e.path != a.query.path {
            throw SpecFailure(description: "mismatch at \(e)" + listing(expected, actual))
        }
    }

    /// Other steps: runs of expected events with one path must meet the same number of actual
    /// events for listeners at that path, matched as a multiset; per registration the actual
    /// types must not go backwards within the run.
    func compareGrouped(_ expected: [ExpectedEvent], _ actual: [Event]) throws {
        guard expected.count == actual.count else {
            throw SpecFailure(description: "event count \(actual.count) != \(expected.count)" + listing(expected, actual))
        }
        var i = 0
        while i < expected.count {
            var j = i
            while j < expected.count && expected[j].path == expected[i].path { j += 1 }
            let run = Array(expected[i..<j])
            let slice = Array(actual[i..<j])
            var used = [Bool](repeating: false, count: run.count)
            var lastType: [String: EventType] = [:]
            for a in slice {
                guard a.query.path == run[0].path else {
                    throw SpecFailure(description: "event for \(a.query.path) where \(run[0].path) expected" + listing(expected, actual))
                }
                guard let k = run.indices.first(where: { !used[$0] && run[$0].matches(a) }) else {
                    throw SpecFailure(description: "unexpected event \(a)" + listing(expected, actual))
                }
                used[k] = true
                let regKey = "\(a.query)|\(a.registration)"
                if let last = lastType[regKey], a.type < last {
                    throw SpecFailure(description: "event types out of order for \(regKey)" + listing(expected, actual))
                }
                lastType[regKey] = a.type
            }
            i = j
        }
    }
}
