/// The kinds of change a trigger fires on (Firebase's `onValueCreated/Updated/Deleted/Written`).
public enum TriggerEventKind: String, Sendable, CaseIterable, Comparable {
    case created, updated, deleted, written

    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }

    /// CloudEvents `type` (Firebase's names): constants, not a string built per event serialized.
    public var cloudEventType: String {
        switch self {
        case .created: return "google.firebase.database.ref.v1.created"
        case .updated: return "google.firebase.database.ref.v1.updated"
        case .deleted: return "google.firebase.database.ref.v1.deleted"
        case .written: return "google.firebase.database.ref.v1.written"
        }
    }

    /// The kind's byte in stored events: its place in `allCases` (declaration order), without
    /// the array `allCases` builds on every use (twice per event stored or read, on every replica).
    public var code: UInt8 {
        switch self {
        case .created: return 0
        case .updated: return 1
        case .deleted: return 2
        case .written: return 3
        }
    }

    /// The kind stored as `code`; nil for a byte no kind has.
    public init?(code: UInt8) {
        switch code {
        case 0: self = .created
        case 1: self = .updated
        case 2: self = .deleted
        case 3: self = .written
        default: return nil
        }
    }
}

/// What a trigger does after an event failed `retries` times.
public enum TriggerFailurePolicy: String, Sendable {
    /// The event goes to the dead-letter list and delivery goes on.
    case `continue`
    /// Delivery stops at the event (kept) until `resume`.
    case stop
}

/// Delivery and retention limits of one trigger, each with a documented default and range.
public struct TriggerLimits: Sendable, Equatable {
    /// One POST's deadline.
    public var timeoutMs = 10_000
    /// Attempts after the first before the failure policy applies.
    public var retries = 8
    /// First retry delay; doubles per attempt up to `maxBackoffMs` (each wait jittered down to
    /// half at random: `TriggerDelivery`).
    public var backoffMs = 200
    public var maxBackoffMs = 30_000
    /// Events per POST (1: one CloudEvent per request; more: a JSON array, `application/cloudevents-batch+json`).
    public var batchSize = 1
    /// POSTs in flight at once (1 keeps strict order at the receiver).
    public var inFlight = 1
    /// A batching trigger's batching window (AWS Lambda's `MaximumBatchingWindowInSeconds`, in
    /// ms): a batch smaller than `batchSize` waits until its first event has waited this long,
    /// so that under load one POST carries what several commits brought. 0: a batch goes as
    /// soon as nothing is in flight (`TriggerDelivery.maxLingerMs` behind a POST in flight).
    /// Each POST costs the delivering node and the receiver a request, a signature, a wakeup
    /// and an answer whatever it carries: a busy leader's per-POST share of its CPU.
    public var batchWindowMs = 0
    public var onFailure = TriggerFailurePolicy.continue
    /// Undelivered log entries (and their bytes) held for this trigger; past either, later
    /// events are not kept and the trigger is marked `behind` with the gap recorded.
    public var retainEntries = 100_000
    public var retainBytes = 64 << 20

    public init() {}

    /// (JSON name, allowed range) of every integer limit, for parsing and the docs. Immutable
    /// (key paths are not Sendable, hence the annotation).
    nonisolated(unsafe) static let ranges: [(String, ClosedRange<Int>, WritableKeyPath<TriggerLimits, Int>)] = [
        ("timeoutMs", 100...300_000, \.timeoutMs),
        ("retries", 0...1_000, \.retries),
        ("backoffMs", 1...3_600_000, \.backoffMs),
        ("maxBackoffMs", 1...86_400_000, \.maxBackoffMs),
        ("batchSize", 1...1_000, \.batchSize),
        ("inFlight", 1...64, \.inFlight),
        ("batchWindowMs", 0...60_000, \.batchWindowMs),
        ("retainEntries", 1...10_000_000, \.retainEntries),
        ("retainBytes", 1_024...(4 << 30), \.retainBytes),
    ]
}

/// One named trigger as defined in `/.settings/triggers.json`.
public struct TriggerDefinition: Sendable, Equatable {
    public var name: String
    public var pattern: TriggerPattern
    public var on: [TriggerEventKind]
    /// nil for a feed.
    public var url: TriggerURL?
    /// Empty for a feed.
    public var secret: String
    public var limits: TriggerLimits
    /// A pull feed (`"feed": true`): nothing is POSTed; consumers read the events from
    /// `GET /.ember/feed` with their own cursor, and the newest `retainEntries` entries are kept.
    public var feed: Bool
    /// The stream of shared change records this trigger reads (0 for a feed, which keeps its
    /// own rows): triggers on one pattern firing on the same kinds share one record per log
    /// entry. A hash of the pattern and the kinds (SHA-1's first 8 bytes), so every replica
    /// names the stream alike.
    public private(set) var group: UInt64 = 0

    /// Named limits of a definition.
    public static let maxNameBytes = 64
    public static let minSecretBytes = 16
    public static let maxSecretBytes = 1_024

    /// The event type this trigger delivers for a change of `kind` (created/updated/deleted),
    /// nil when it does not fire: the specific kind when listed, else `written` when listed.
    public func firedType(for kind: TriggerEventKind) -> TriggerEventKind? {
        if on.contains(kind) { return kind }
        return on.contains(.written) ? .written : nil
    }

    public init(name: String, json: JSON) throws(TriggerDefinitionError) {
        guard Self.isValidName(name) else {
            throw .init("trigger name \"\(name.prefix(80))\" must be 1-\(Self.maxNameBytes) characters of A-Z a-z 0-9 - _")
        }
        func fail(_ why: String) -> TriggerDefinitionError { .init("trigger \(name): \(why)") }
        guard case .object(let o) = json else { throw fail("definition must be an object") }
        let known: Set<String> = Set(["path", "on", "url", "secret", "onFailure", "feed"] + TriggerLimits.ranges.map(\.0))
        for (k, _) in o where !known.contains(k) { throw fail("unknown field \"\(k.prefix(80))\"") }
        guard let path = o["path"]?.stringValue else { throw fail("\"path\" (a string) is required") }
        do { pattern = try TriggerPattern(parsing: path) } catch { throw fail(error.reason) }
        guard case .array(let kinds)? = o["on"], !kinds.isEmpty else {
            throw fail("\"on\" must be a non-empty array of created, updated, deleted, written")
        }
        var on: [TriggerEventKind] = []
        for k in kinds {
            guard let s = k.stringValue, let kind = TriggerEventKind(rawValue: s) else {
                throw fail("\"on\" may hold only created, updated, deleted, written")
            }
            if !on.contains(kind) { on.append(kind) }
        }
        self.on = on.sorted()
        switch o["feed"] {
        case nil, .bool(false)?: feed = false
        case .bool(true)?: feed = true
        default: throw fail("\"feed\" must be true or false")
        }
        if feed {
            guard o["url"] == nil && o["secret"] == nil else { throw fail("a feed has no \"url\" or \"secret\"") }
            url = nil
            secret = ""
        } else {
            guard let u = o["url"]?.stringValue else { throw fail("\"url\" (a string) is required") }
            do { url = try TriggerURL(parsing: u) } catch { throw fail(error.reason) }
            guard let s = o["secret"]?.stringValue else { throw fail("\"secret\" (a string) is required") }
            guard (Self.minSecretBytes...Self.maxSecretBytes).contains(s.utf8.count) else {
                throw fail("\"secret\" must be \(Self.minSecretBytes)-\(Self.maxSecretBytes) bytes")
            }
            secret = s
        }
        var limits = TriggerLimits()
        for (key, range, kp) in TriggerLimits.ranges {
            guard let v = o[key] else { continue }
            guard case .int(let i) = v, range.contains(Int(i)) else {
                throw fail("\"\(key)\" must be an integer in \(range.lowerBound)...\(range.upperBound)")
            }
            limits[keyPath: kp] = Int(i)
        }
        if let f = o["onFailure"] {
            guard let s = f.stringValue, let p = TriggerFailurePolicy(rawValue: s) else {
                throw fail("\"onFailure\" must be \"continue\" or \"stop\"")
            }
            limits.onFailure = p
        }
        guard limits.maxBackoffMs >= limits.backoffMs else { throw fail("\"maxBackoffMs\" must be at least \"backoffMs\"") }
        guard limits.batchWindowMs == 0 || limits.batchSize > 1 else {
            throw fail("\"batchWindowMs\" holds a partial batch: it needs a \"batchSize\" above 1")
        }
        self.name = name
        self.limits = limits
        if !feed { group = Self.group(pattern: pattern, on: self.on) }
    }

    static func group(pattern: TriggerPattern, on: [TriggerEventKind]) -> UInt64 {
        let digest = SHA1.digest(Array((pattern.description + "\u{0}" + on.map(\.rawValue).joined(separator: ",")).utf8))
        let id = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return id == 0 ? 1 : id
    }

    static func isValidName(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= maxNameBytes
            && s.utf8.allSatisfy { (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) || $0 == 95 || $0 == 45 }
    }

    /// The definition as stored and as `GET` answers it (every limit spelled out, the batching
    /// window when set).
    public var json: JSON {
        var o: KeyMap<JSON> = [:]
        o["path"] = .string(pattern.description)
        o["on"] = .array(on.map { .string($0.rawValue) })
        if let url { o["url"] = .string(url.text); o["secret"] = .string(secret) } else { o["feed"] = .bool(true) }
        // A batching window only when set: the logged document is this one (`TriggerSet.text`),
        // and a member of 0.7.0 refuses a field it does not know (`TriggerSet.usesBatchWindow`).
        for (key, _, kp) in TriggerLimits.ranges where key != "batchWindowMs" || limits.batchWindowMs != 0 {
            o[key] = .int(Int64(limits[keyPath: kp]))
        }
        o["onFailure"] = .string(limits.onFailure.rawValue)
        return .object(o)
    }
}

/// A namespace's triggers: the document `PUT /.settings/triggers.json` takes (`{}` removes all).
public struct TriggerSet: Sendable, Equatable {
    /// Sorted by name.
    public let definitions: [TriggerDefinition]

    /// Named limits of the document.
    public static let maxTriggers = 32
    public static let maxDocumentBytes = 64 * 1024

    /// The definitions as a write's apply reads them (`TriggerPatternPlan`), made once.
    public let plan: [TriggerPatternPlan]
    /// The plans by their patterns' first keys: which a write can touch (`candidates`).
    public let index: TriggerPatternIndex
    /// The groups read by more than one trigger: the apply serializes their events' shared
    /// members once for all their lanes (`TriggerEvent.sharedMembers`).
    public let crowdedGroups: Set<UInt64>

    public static let empty = TriggerSet(definitions: [])

    init(definitions: [TriggerDefinition]) {
        self.definitions = definitions
        plan = TriggerPatternPlan.plan(definitions)
        index = TriggerPatternIndex(plan.map(\.pattern))
        crowdedGroups = Self.crowded(definitions)
    }

    public init(text: String) throws(TriggerDefinitionError) {
        guard text.utf8.count <= Self.maxDocumentBytes else {
            throw .init("the triggers document is larger than \(Self.maxDocumentBytes) bytes")
        }
        let json: JSON
        do { json = try JSON.parse(text) } catch { throw .init("the triggers document is not valid JSON") }
        try self.init(json: json)
    }

    public init(json: JSON) throws(TriggerDefinitionError) {
        guard case .object(let o) = json else {
            throw .init("the triggers document must be an object of named triggers")
        }
        guard o.count <= Self.maxTriggers else { throw .init("at most \(Self.maxTriggers) triggers per namespace") }
        var defs: [TriggerDefinition] = []
        for (name, def) in o { defs.append(try TriggerDefinition(name: name, json: def)) }
        definitions = defs.sorted { $0.name < $1.name }
        plan = TriggerPatternPlan.plan(definitions)
        index = TriggerPatternIndex(plan.map(\.pattern))
        crowdedGroups = Self.crowded(definitions)
    }

    static func crowded(_ definitions: [TriggerDefinition]) -> Set<UInt64> {
        var seen = Set<UInt64>(), crowded = Set<UInt64>()
        for d in definitions where !d.feed && !seen.insert(d.group).inserted { crowded.insert(d.group) }
        return crowded
    }

    public func definition(named name: String) -> TriggerDefinition? { definitions.first { $0.name == name } }

    public var isEmpty: Bool { definitions.isEmpty }

    public var json: JSON {
        .object(KeyMap(uniqueKeysWithValues: definitions.map { ($0.name, $0.json) }))
    }

    /// The canonical text stored in the log and the state (every limit spelled out but a zero
    /// `batchWindowMs`: see `TriggerDefinition.json`).
    public var text: String { json.serialized() }

    /// Whether the document `text` gives a trigger a batching window: a field members before
    /// peer level 5 (0.7.0) do not read, logged only once every member reads it.
    public static func usesBatchWindow(_ text: String) -> Bool {
        (try? TriggerSet(text: text))?.definitions.contains { $0.limits.batchWindowMs > 0 } ?? false
    }
}

/// An http(s) URL a trigger POSTs to, split for the client: no user info or fragment.
public struct TriggerURL: Sendable, Equatable {
    public let text: String
    public let tls: Bool
    public let host: String
    public let port: Int
    /// Path and query, at least "/".
    public let target: String

    public static let maxBytes = 2_048

    public init(parsing s: String) throws(TriggerDefinitionError) {
        guard s.utf8.count <= Self.maxBytes else { throw .init("\"url\" is longer than \(Self.maxBytes) bytes") }
        let rest: Substring
        if s.hasPrefix("http://") { tls = false; rest = s.dropFirst(7) } else if s.hasPrefix("https://") {
            tls = true; rest = s.dropFirst(8)
        } else { throw .init("\"url\" must be an http:// or https:// URL") }
        guard s.utf8.allSatisfy({ $0 > 32 && $0 < 127 }) else { throw .init("\"url\" must be printable ASCII without spaces") }
        guard !s.contains("#") else { throw .init("\"url\" must not have a fragment") }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let query = rest.firstIndex(of: "?") ?? rest.endIndex
        let authorityEnd = min(slash, query)
        let authority = rest[..<authorityEnd]
        guard !authority.contains("@") else { throw .init("\"url\" must not carry user info") }
        var hostPart = authority
        var portText: Substring? = nil
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw .init("\"url\" has an unclosed IPv6 address") }
            hostPart = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw .init("\"url\" has a bad port") }
                portText = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            hostPart = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        }
        guard !hostPart.isEmpty else { throw .init("\"url\" has no host") }
        if let portText {
            guard let p = Int(portText), (1...65_535).contains(p) else { throw .init("\"url\" has a bad port") }
            port = p
        } else {
            port = tls ? 443 : 80
        }
        host = String(hostPart)
        let t = rest[authorityEnd...]
        target = t.isEmpty ? "/" : (t.hasPrefix("?") ? "/" + t : String(t))
        text = s
    }
}

/// One pattern of a namespace's triggers as a write's apply uses it: the values at its scopes
/// are read and its changes diffed once, then each group of triggers on it (`groups`: one
/// definition standing for each, since a group's triggers fire on the same kinds) gets one
/// shared record and each feed its own row. Made once per definitions document: comparing or
/// describing every trigger's pattern on every write cost the writer (and each replica's
/// apply) more than the write itself with ten triggers.
public struct TriggerPatternPlan: Sendable, Equatable {
    public let pattern: TriggerPattern
    /// One definition per group on the pattern, in name order of their first member.
    public let groups: [TriggerDefinition]
    public let feeds: [TriggerDefinition]
    /// The groups that fire for a created location, each with the type it fires
    /// (`firedType(for: .created)`), in `groups` order: what the common creation's apply
    /// reads per write on every replica, without copying a definition (`Applier.recordCreated`).
    public let createdGroups: [FiredGroup]

    public struct FiredGroup: Sendable, Equatable {
        public let group: UInt64
        public let type: TriggerEventKind
    }

    init(pattern: TriggerPattern, groups: [TriggerDefinition], feeds: [TriggerDefinition]) {
        self.pattern = pattern
        self.groups = groups
        self.feeds = feeds
        createdGroups = groups.compactMap { d in d.firedType(for: .created).map { FiredGroup(group: d.group, type: $0) } }
    }

    static func plan(_ definitions: [TriggerDefinition]) -> [TriggerPatternPlan] {
        var patterns: [TriggerPattern] = []
        var groups: [[TriggerDefinition]] = []
        var feeds: [[TriggerDefinition]] = []
        for d in definitions {
            let k: Int
            if let i = patterns.firstIndex(of: d.pattern) { k = i } else {
                patterns.append(d.pattern)
                groups.append([])
                feeds.append([])
                k = patterns.count - 1
            }
            if d.feed { feeds[k].append(d) } else if !groups[k].contains(where: { $0.group == d.group }) { groups[k].append(d) }
        }
        return patterns.indices.map { TriggerPatternPlan(pattern: patterns[$0], groups: groups[$0], feeds: feeds[$0]) }
    }
}
