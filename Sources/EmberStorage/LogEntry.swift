import EmberCore

/// A precondition on a write, checked at apply time against the value at the write's path.
public enum WriteCondition: Sendable, Equatable {
    /// The path's version (`EmberStore.version`) must equal this.
    case ifVersion(UInt64)
    /// `Node.firebaseHash` of the current value must equal this ("" = absent).
    case ifHash(String)
    /// The path must hold data at this version; nil: it must hold none. (REST `if-match` as the
    /// front parsed its ETag; in the log as that ETag's text, see `encodeDataVersion`.)
    case ifDataVersion(UInt64?)
}

/// The operation a log entry carries. JSON is unresolved client JSON (server values are resolved
/// when the entry is applied, with the entry's timestamp).
public enum WriteOperation: Sendable, Equatable {
    /// Replaces the value at `path` (null deletes).
    case set(path: Path, value: JSON, condition: WriteCondition? = nil)
    /// Multi-path update relative to `path`, atomic; null values delete.
    case update(path: Path, values: [(Path, JSON)], condition: WriteCondition? = nil)
    /// `update` with each part as its checked JSON text (peer level 5, `UpdateText`): encoded
    /// as a copy of the texts, decoded as spans of the entry's bytes, built into nodes from the
    /// text when applied. Only writes without server values (their nodes need no data).
    case updateText(path: Path, parts: UpdateText, condition: WriteCondition? = nil)
    /// Changes nothing (a Raft leader's first entry of a term, or a placeholder).
    case noop
    /// Replaces the namespace's security rules (a rules document's text, checked before it is
    /// logged). Replicated like data so every replica judges later entries by the same rules.
    case setRules(text: String)
    /// onDisconnect bookkeeping (`OnDisconnectOperation`): kept in the replicated state so any
    /// replica can run a session's operations when the node holding the session is gone.
    indirect case onDisconnect(OnDisconnectOperation)
    /// The point-in-time archive (`Archiver`) holds every entry through this index: replicated
    /// so a new leader continues the archive where the old one stopped, and so every replica
    /// keeps the entries not yet archived in its log (`StoreOptions.archiveHold`).
    case archived(through: UInt64)
    /// Trigger definitions and delivery bookkeeping (`TriggerOperation`).
    case triggers(TriggerOperation)

    public var path: Path {
        switch self {
        case .set(let p, _, _), .update(let p, _, _), .updateText(let p, _, _): return p
        case .noop, .setRules, .onDisconnect, .archived, .triggers: return .root
        }
    }

    public var condition: WriteCondition? {
        switch self {
        case .set(_, _, let c), .update(_, _, let c), .updateText(_, _, let c): return c
        case .noop, .setRules, .onDisconnect, .archived, .triggers: return nil
        }
    }

    public static func == (a: WriteOperation, b: WriteOperation) -> Bool {
        switch (a, b) {
        case let (.set(p1, v1, c1), .set(p2, v2, c2)): return p1 == p2 && v1 == v2 && c1 == c2
        case let (.update(p1, u1, c1), .update(p2, u2, c2)):
            return p1 == p2 && c1 == c2 && u1.count == u2.count && zip(u1, u2).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        case let (.updateText(p1, t1, c1), .updateText(p2, t2, c2)): return p1 == p2 && c1 == c2 && t1 == t2
        case (.noop, .noop): return true
        case let (.setRules(a), .setRules(b)): return a == b
        case let (.onDisconnect(a), .onDisconnect(b)): return a == b
        case let (.archived(a), .archived(b)): return a == b
        case let (.triggers(a), .triggers(b)): return a == b
        default: return false
        }
    }
}

/// Who wrote an entry, as the rules judge it when the entry is applied. Carried in the entry so
/// every replica (and a replay) reaches the same verdict.
public enum WriteAuth: Sendable, Equatable {
    /// Bypasses rules (the node's owner, admin credentials, internal writes).
    case admin
    /// The `auth` variable of rules: a token's claims, or nil when unauthenticated.
    case user(JSON?)
}

/// One replicated log entry. `timestamp` (ms since 1970) is fixed when the entry is created so
/// every replica resolves `{".sv": "timestamp"}` alike, and rules see it as `now`.
public struct LogEntry: Sendable, Equatable {
    public var index: UInt64
    public var term: UInt64
    public var namespace: String
    public var operation: WriteOperation
    public var timestamp: Int64
    public var auth: WriteAuth
    /// The client's name for this write (exactly-once: `WriterTable`); nil for writes without one.
    public var writer: WriterStamp?

    public init(index: UInt64, term: UInt64, namespace: String, operation: WriteOperation, timestamp: Int64,
                auth: WriteAuth = .admin, writer: WriterStamp? = nil) {
        self.index = index
        self.term = term
        self.namespace = namespace
        self.operation = operation
        self.timestamp = timestamp
        self.auth = auth
        self.writer = writer
    }

    /// Deterministic binary encoding (format 2): index, term, timestamp, namespace, auth,
    /// operation. Binary rather than JSON text so an integral double stays a double on every
    /// replica. Format 1 (no auth) decodes as an admin entry: it was written before rules were
    /// judged. A writer stamp follows the operation as an optional trailer (tag 1, id, number):
    /// a node that predates stamps reads the entry and ignores the trailer.
    public func encoded() -> [UInt8] {
        // Header (25 bytes), namespace, auth and a small operation fit without regrowing.
        var w = ByteWriter(capacity: 160)
        w.u8(2)
        w.u64(index); w.u64(term); w.i64(timestamp)
        w.string(namespace)
        switch auth {
        case .admin: w.u8(0)
        case .user(nil): w.u8(1)
        case .user(let claims?): w.u8(2); w.json(claims)
        }
        Self.encode(operation, into: &w)
        if let writer {
            w.u8(Self.writerTrailer)
            w.string(writer.writer)
            w.u64(writer.seq)
        }
        return w.bytes
    }

    /// `encoded().count` without encoding a data write: a single node that keeps no log
    /// (`StoreOptions.singleNodeLogRetention`) checks an entry's size and never stores its
    /// bytes, and encoding a bulk update (every object's keys sorted, every byte copied) was
    /// work for a number. Other operations are small: they are encoded and counted.
    public func encodedSize() -> Int {
        var n = 1 + 24 + Self.stringSize(namespace)
        switch auth {
        case .admin, .user(nil): n += 1
        case .user(let claims?): n += 1 + Self.jsonSize(claims)
        }
        func cond(_ c: WriteCondition?) -> Int {
            switch c {
            case nil: return 1
            case .ifVersion?: return 9
            case .ifHash(let h)?: return 1 + Self.stringSize(h)
            case .ifDataVersion(let v)?: return 1 + Self.stringSize(Self.encodeDataVersion(v))
            }
        }
        switch operation {
        case .set(let p, let v, let c):
            n += 1 + Self.stringSize(p.description) + cond(c) + Self.jsonSize(v)
        case .update(let p, let vs, let c):
            n += 1 + Self.stringSize(p.description) + cond(c) + Self.varintSize(vs.count)
            for (rp, v) in vs { n += Self.stringSize(rp.description) + Self.jsonSize(v) }
        case .updateText(let p, let text, let c):
            n += 1 + Self.stringSize(p.description) + cond(c) + Self.varintSize(text.count)
            for (rp, range) in text.parts { n += Self.stringSize(rp.description) + Self.varintSize(range.count) + range.count }
        case .noop, .setRules, .onDisconnect, .archived, .triggers:
            return encoded().count
        }
        if let writer { n += 1 + Self.stringSize(writer.writer) + 8 }
        return n
    }

    /// Bytes of `ByteWriter.varint(v)`.
    static func varintSize(_ v: Int) -> Int { varintSize(UInt64(v)) }

    /// Bytes of `ByteWriter.uvarint(v)`.
    static func varintSize(_ v: UInt64) -> Int {
        var x = v, n = 1
        while x >= 0x80 { n += 1; x >>= 7 }
        return n
    }

    /// Bytes of `ByteWriter.string(s)`.
    static func stringSize(_ s: String) -> Int {
        let u = s.utf8.count
        return varintSize(u) + u
    }

    /// Bytes of `ByteWriter.json(j)` (the order of an object's members changes no size).
    static func jsonSize(_ j: JSON) -> Int {
        switch j {
        case .null, .bool: return 1
        case .int, .double: return 9
        case .string(let s): return 1 + stringSize(s)
        case .array(let a): return a.reduce(1 + varintSize(a.count)) { $0 + jsonSize($1) }
        case .object(let o):
            var n = 1 + varintSize(o.count)
            for (k, v) in o { n += stringSize(k) + jsonSize(v) }
            return n
        }
    }

    static let writerTrailer: UInt8 = 1
    /// Operation tag of `.archived`.
    static let archivedTag: UInt8 = 32
    static let triggersTag: UInt8 = 16
    /// Operation tag of `.updateText` (the next small one).
    static let updateTextTag: UInt8 = 5

    /// Writes index, term and timestamp into an entry encoded with zeros there (the header has a
    /// fixed layout: format byte, then three 8-byte fields), so a write is encoded only once.
    static func setHeader(_ bytes: inout [UInt8], index: UInt64, term: UInt64, timestamp: Int64) {
        precondition(bytes.count >= 25 && (bytes[0] == 1 || bytes[0] == 2), "not an encoded log entry")
        for (field, value) in [index, term, UInt64(bitPattern: timestamp)].enumerated() {
            for k in 0..<8 { bytes[1 + field * 8 + k] = UInt8((value >> UInt64(56 - 8 * k)) & 0xFF) }
        }
    }

    /// `setHeader` on an encoding in place (a log row's space in an LMDB page).
    static func setHeader(_ bytes: UnsafeMutableRawBufferPointer, index: UInt64, term: UInt64, timestamp: Int64) {
        precondition(bytes.count >= 25 && (bytes[0] == 1 || bytes[0] == 2), "not an encoded log entry")
        bytes.storeBytes(of: index.bigEndian, toByteOffset: 1, as: UInt64.self)
        bytes.storeBytes(of: term.bigEndian, toByteOffset: 9, as: UInt64.self)
        bytes.storeBytes(of: UInt64(bitPattern: timestamp).bigEndian, toByteOffset: 17, as: UInt64.self)
    }

    /// The encoding with index, term and timestamp replaced (no decode and encode): a Raft
    /// leader stamps a client's entry, and a node stores what the wire carried.
    public static func restamped(_ bytes: [UInt8], index: UInt64, term: UInt64, timestamp: Int64) throws(StorageError) -> [UInt8] {
        guard bytes.count >= 25 && (bytes[0] == 1 || bytes[0] == 2) else { throw .corrupt("not an encoded log entry") }
        var out = bytes
        setHeader(&out, index: index, term: term, timestamp: timestamp)
        return out
    }

    /// Whether an encoded entry is a triggers `advance` entry (peer level 4), which a 0.6.0
    /// member cannot decode: read up to the operation's tags, no more. An entry this cannot
    /// read is not one (the apply refuses it anyway).
    public static func isTriggerAdvance(_ bytes: [UInt8]) -> Bool {
        guard var r = readerAtOperation(bytes) else { return false }
        return (try? r.u8() == triggersTag && r.u8() == 7) ?? false
    }

    /// Whether an encoded entry is an `updateText` entry (peer level 5), which a member of an
    /// older build cannot decode: read up to the operation's tag, no more.
    public static func isUpdateText(_ bytes: [UInt8]) -> Bool {
        guard var r = readerAtOperation(bytes) else { return false }
        return (try? r.u8() == updateTextTag) ?? false
    }

    /// A reader past an encoded entry's header (format, index, term, timestamp, namespace and,
    /// in format 2, the writer's auth), at its operation's tag: what the peer-level gates look
    /// at without decoding the rest. Nil when the header cannot be read.
    private static func readerAtOperation(_ bytes: [UInt8]) -> ByteReader? {
        var r = ByteReader(bytes)
        do {
            let format = try r.u8()
            guard format == 1 || format == 2 else { return nil }
            _ = try r.u64(); _ = try r.u64(); _ = try r.i64()
            _ = try r.string()
            if format == 2 {
                let auth = try r.u8()
                if auth == 2 { _ = try r.json() }
            }
            return r
        } catch {
            return nil
        }
    }

    /// The timestamp field of an encoded entry.
    public static func timestamp(of bytes: [UInt8]) throws(StorageError) -> Int64 {
        guard bytes.count >= 25 && (bytes[0] == 1 || bytes[0] == 2) else { throw .corrupt("not an encoded log entry") }
        var v: UInt64 = 0
        for k in 17..<25 { v = v << 8 | UInt64(bytes[k]) }
        return Int64(bitPattern: v)
    }

    public init(decoding bytes: [UInt8]) throws(StorageError) {
        var r = ByteReader(bytes)
        let format = try r.u8()
        guard format == 1 || format == 2 else { throw .corrupt("log entry format") }
        index = try r.u64(); term = try r.u64(); timestamp = try r.i64()
        namespace = try r.string()
        auth = .admin
        if format == 2 {
            switch try r.u8() {
            case 0: auth = .admin
            case 1: auth = .user(nil)
            case 2: auth = .user(try r.json())
            default: throw .corrupt("log entry auth")
            }
        }
        operation = try Self.decodeOperation(&r, limit: bytes.count)
        writer = nil
        if !r.atEnd {
            guard try r.u8() == Self.writerTrailer else { throw .corrupt("log entry trailer") }
            writer = WriterStamp(writer: try r.string(), seq: try r.u64())
        }
    }

    /// Condition 3's text in the log, kept from the format's first level (entries logged then and
    /// entries of older members in a mixed cluster carry it): "v<version>" or "null_etag" for
    /// no data. Text that is neither names no version any data has (`UInt64.max`): it never holds.
    static func encodeDataVersion(_ v: UInt64?) -> String { v.map { "v\($0)" } ?? "null_etag" }

    static func decodeDataVersion(_ text: String) -> UInt64? {
        if text == "null_etag" { return nil }
        let digits = text.dropFirst()
        // Exactly the text `encodeDataVersion` writes: "v007" named no version before either.
        guard text.first == "v", let v = UInt64(digits), String(v) == digits else { return .max }
        return v
    }

    static func encode(_ operation: WriteOperation, into w: inout ByteWriter) {
        func cond(_ c: WriteCondition?) {
            switch c {
            case nil: w.u8(0)
            case .ifVersion(let v)?: w.u8(1); w.u64(v)
            case .ifHash(let h)?: w.u8(2); w.string(h)
            case .ifDataVersion(let v)?: w.u8(3); w.string(Self.encodeDataVersion(v))
            }
        }
        switch operation {
        case .noop: w.u8(0)
        case .set(let p, let v, let c):
            w.u8(1); w.string(p.description); cond(c); w.json(v)
        case .update(let p, let vs, let c):
            w.u8(2); w.string(p.description); cond(c)
            w.varint(vs.count)
            for (rp, v) in vs { w.string(rp.description); w.json(v) }
        case .updateText(let p, let text, let c):
            w.u8(Self.updateTextTag); w.string(p.description); cond(c)
            w.varint(text.count)
            for (rp, range) in text.parts {
                w.string(rp.description)
                w.varint(range.count)
                w.bytes.append(contentsOf: text.bytes[range])
            }
        case .setRules(let text):
            w.u8(3); w.string(text)
        case .onDisconnect(let op):
            w.u8(4); op.encode(into: &w)
        case .archived(let through):
            // A tag well past the others: operations added meanwhile take the next ones.
            w.u8(Self.archivedTag); w.u64(through)
        case .triggers(let op):
            // Tag 16: clear of the small tags other operations take.
            w.u8(Self.triggersTag); TriggerOperation.encode(op, into: &w)
        }
    }

    /// `limit`: the entry's size, which bounds every count read from it. `nested`: the write
    /// an onDisconnect registration carries, which holds no bookkeeping of its own (so decoding
    /// never recurses deeper than one level).
    static func decodeOperation(_ r: inout ByteReader, limit: Int, nested: Bool = false) throws(StorageError) -> WriteOperation {
        func cond() throws(StorageError) -> WriteCondition? {
            switch try r.u8() {
            case 0: return nil
            case 1: return .ifVersion(try r.u64())
            case 2: return .ifHash(try r.string())
            case 3: return .ifDataVersion(Self.decodeDataVersion(try r.string()))
            default: throw .corrupt("log entry condition")
            }
        }
        switch try r.u8() {
        case 0: return .noop
        case 1:
            let p = try r.path()
            let c = try cond()
            return .set(path: p, value: try r.json(), condition: c)
        case 2:
            let p = try r.path()
            let c = try cond()
            let n = try r.varint()
            guard n <= limit else { throw .corrupt("update count") }
            var vs: [(Path, JSON)] = []
            for _ in 0..<n {
                let rp = try r.path()
                vs.append((rp, try r.json()))
            }
            return .update(path: p, values: vs, condition: c)
        case Self.updateTextTag where !nested:
            let p = try r.path()
            let c = try cond()
            let n = try r.varint()
            guard n <= limit else { throw .corrupt("update count") }
            var parts: [(path: Path, range: Range<Int>)] = []
            parts.reserveCapacity(n)
            for _ in 0..<n {
                let rp = try r.path()
                let length = try r.varint()
                guard length > 0, r.i + length <= r.bytes.count else { throw .corrupt("update part text") }
                // In path order, none at or below another (as it was checked before it was logged):
                // the apply writes the parts in any order on that promise.
                if let last = parts.last, !(last.path < rp && !last.path.contains(rp)) { throw .corrupt("update part order") }
                guard !rp.isRoot else { throw .corrupt("update part path") }
                parts.append((rp, r.i..<r.i + length))
                r.i += length
            }
            // The texts stay in the entry's bytes: sliced, not copied (they are checked when built).
            return .updateText(path: p, parts: UpdateText(bytes: r.bytes, parts: parts), condition: c)
        case 3: return .setRules(text: try r.string())
        case 4 where !nested: return .onDisconnect(try OnDisconnectOperation(decoding: &r, limit: limit))
        case Self.archivedTag where !nested: return .archived(through: try r.u64())
        case Self.triggersTag where !nested: return .triggers(try TriggerOperation.decode(&r, limit: limit))
        default: throw .corrupt("log entry operation")
        }
    }
}

/// What listeners need from a committed write: each part's absolute path and its new resolved
/// value (empty = deleted), in the order applied.
public struct ChangeSet: Sendable, Equatable {
    public var namespace: String
    public var changes: [(path: Path, node: Node)]

    public init(namespace: String, changes: [(path: Path, node: Node)]) {
        self.namespace = namespace
        self.changes = changes
    }

    public static func == (a: ChangeSet, b: ChangeSet) -> Bool {
        a.namespace == b.namespace && a.changes.count == b.changes.count
            && zip(a.changes, b.changes).allSatisfy { $0.path == $1.path && $0.node == $1.node }
    }
}

/// The outcome of one log entry.
public enum WriteOutcome: Sendable, Equatable {
    /// Written. `changed` is false when the data was already equal (versions did not move).
    case applied(changed: Bool)
    /// The condition did not hold; nothing was written. Carries the current value and version.
    case conditionFailed(current: Node, version: UInt64)
    /// Apply-time validation failed (for example a server value that cannot be resolved);
    /// nothing was written. Deterministic, so every replica records the same.
    case rejected(StorageError)
    /// The security rules refused the write; nothing was written (no tree or version change).
    /// Decided at apply time in log order, so every replica records the same.
    case denied
    /// A `.noop` entry, or a `.setRules` entry that took effect.
    case noop
}

public struct WriteResult: Sendable, Equatable {
    public var index: UInt64
    public var term: UInt64
    public var namespace: String { willSet { keepChanges() } }
    public var path: Path { willSet { keepChanges() } }
    public var outcome: WriteOutcome
    /// For `set`: the value at the path after the write. For `update`: the resolved patch (the
    /// written parts relative to `path`, like Firebase's PATCH response). For a failed condition:
    /// the current value. Built from `textPatch` when read, when the apply built no node.
    public var value: Node {
        get { valueFromText?.value ?? storedValue }
        set { keepChanges(); storedValue = newValue; valueFromText = nil }
        // In place (`result.value.set(...)`): a get and a set would copy the node's storage.
        _modify {
            keepChanges()
            if let patch = valueFromText { storedValue = patch.value; valueFromText = nil }
            yield &storedValue
        }
    }
    /// The path's version after the write (the current one for a failed condition).
    public var version: UInt64
    /// Changes for listeners; empty unless the entry was applied and changed something. Built
    /// from `textPatch` when read, when the apply built no node.
    public var changeSet: ChangeSet {
        get {
            if changesFromValue { return ChangeSet(namespace: namespace, changes: [(path, storedValue)]) }
            return changesFromText.map { ChangeSet(namespace: namespace, changes: $0.changes) } ?? storedChanges
        }
        set { storedChanges = newValue; changesFromText = nil; changesFromValue = false }
        // In place: the apply appends a bulk update's changes one by one, and each append
        // through a get and a set copied the whole array (quadratic: a 256 MB import into one
        // node took 36.6 s instead of 5.1).
        _modify {
            keepChanges()
            if let patch = changesFromText { storedChanges = ChangeSet(namespace: namespace, changes: patch.changes); changesFromText = nil }
            yield &storedChanges
        }
    }
    // `namespace` and `path` feed a change built when read: one set after it keeps the old.
    private var storedValue: Node
    private var storedChanges: ChangeSet
    /// An applied set's one change is its path and value (`changesFollowValue`): built when
    /// read. Only the listeners' feed reads it, for watched namespaces (`LMDBCommitFeed`); a
    /// learner's or any member's apply made an array per write for nothing (issue 38).
    private var changesFromValue = false

    /// The change set is the set's own: `(path, value)` as they are now, built when read.
    mutating func changesFollowValue() {
        assert(valueFromText == nil && changesFromText == nil, "a set's value is a node")
        storedChanges = ChangeSet(namespace: namespace, changes: [])
        changesFromValue = true
    }

    /// Builds the change set that follows the value before the value, path or namespace moves.
    private mutating func keepChanges() {
        guard changesFromValue else { return }
        changesFromValue = false
        storedChanges = ChangeSet(namespace: namespace, changes: [(path, storedValue)])
    }
    /// A text update applied without its nodes (`Applier.writeText`): `value` and `changeSet`
    /// are built from it when read (most are not: issue 42).
    private var valueFromText: TextPatch?
    private var changesFromText: TextPatch?

    /// What `value` is built from, until it is read or set (nil: it is kept as it is).
    public var textPatch: TextPatch? { valueFromText }

    init(index: UInt64, term: UInt64, namespace: String, path: Path, outcome: WriteOutcome, value: Node,
         version: UInt64, changeSet: ChangeSet) {
        self.index = index
        self.term = term
        self.namespace = namespace
        self.path = path
        self.outcome = outcome
        self.storedValue = value
        self.version = version
        self.storedChanges = changeSet
    }

    /// `value` and `changeSet` are those of `patch`, built when read.
    mutating func buildLater(from patch: TextPatch) {
        changesFromValue = false
        storedValue = .empty
        storedChanges = ChangeSet(namespace: namespace, changes: [])
        valueFromText = patch
        changesFromText = patch
    }

    /// The same answer (a value built from text or kept, alike).
    public static func == (a: WriteResult, b: WriteResult) -> Bool {
        a.index == b.index && a.term == b.term && a.namespace == b.namespace && a.path == b.path && a.outcome == b.outcome
            && a.version == b.version && a.rulesChanged == b.rulesChanged && a.ran == b.ran && a.duplicate == b.duplicate
            && a.triggerReach == b.triggerReach && a.value == b.value && a.changeSet == b.changeSet
    }
    /// A `.setRules` entry took effect: open listens must be judged again.
    public var rulesChanged = false
    /// An onDisconnect `run` entry: the results of the session's operations, in the order they
    /// ran, each as if it were an entry of its own at this index (listeners get one change each).
    public var ran: [WriteResult] = []
    /// A stamped write its writer had already run (`WriterTable`): answered, not applied again.
    public var duplicate = false
    /// What the entry may have given its namespace's trigger delivery lanes to read (a set or
    /// an update says exactly; any other entry reaches them all).
    public var triggerReach: TriggerReach = .namespace

    public var isApplied: Bool { if case .applied = outcome { return true } else { return false } }
}
