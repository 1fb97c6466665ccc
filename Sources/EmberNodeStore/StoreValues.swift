import EmberCore

/// What a write must find at its location to go ahead. Decided when the write is applied, in
/// log order, so every replica reaches the same verdict.
public enum WriteCondition: Sendable, Equatable {
    /// REST `if-match` as the front read its ETag: the data at the path has this version (nil:
    /// there is none).
    case dataVersion(UInt64?)
    /// Ember wire extension: the path version the client saw.
    case version(UInt64)
    /// Wire protocol compare-and-set: the §6.8 hash of the current value ("" = absent).
    case hash(String)
}

/// A client's name for a write (wire `w: {"id", "n"}`): the log answers a number its writer
/// already ran without applying it again (exactly-once across resends).
public struct WriteStamp: Sendable, Hashable {
    public let writer: String
    public let seq: UInt64

    public init(writer: String, seq: UInt64) {
        self.writer = writer
        self.seq = seq
    }
}

public struct WriteRequest: Sendable {
    public enum Kind: Sendable {
        /// Replace the value at `path` (null deletes).
        case set(JSON)
        /// Multi-path update: relative paths → values (null deletes), atomic.
        case update([(Path, JSON)])
        /// `update` as its parts' checked text (a REST PATCH without server values), with the
        /// nodes the front's scan built from it (`UpdateText.scan`; nil: the scan checked the
        /// text without building them, `WritePort.appliesFrontNodes`): logged as the text where
        /// every member reads it, else as `update`.
        case updateText(UpdateText, nodes: [Node]?)

        /// The tree form of a text update (`update`); any other kind as it is.
        public func asTree() throws -> Kind {
            guard case .updateText(let text, _) = self else { return self }
            return .update(try text.json())
        }
    }

    public var namespace: String
    public var path: Path
    public var kind: Kind
    public var condition: WriteCondition?
    /// Who writes: the entry carries it and the rules judge it when the entry is applied.
    /// Required: a default would silently make a forgotten identity an admin write.
    public var identity: Identity
    /// The client's name for the write (exactly-once across resends), if it gave one.
    public var writer: WriteStamp?

    public init(namespace: String, path: Path, kind: Kind, condition: WriteCondition? = nil, identity: Identity,
                writer: WriteStamp? = nil) {
        self.namespace = namespace
        self.path = path
        self.kind = kind
        self.condition = condition
        self.identity = identity
        self.writer = writer
    }
}

public struct WriteOutcome: Sendable {
    /// The log index the write was decided at.
    public var index: UInt64
    /// False when the condition did not hold: nothing was written.
    public var applied: Bool
    /// After a set: the value at the path. After an update: the resolved parts at their relative
    /// paths. When not applied: the current value. A text update applied without its nodes
    /// builds it from its text when read (an import's `print=silent` PATCHes never read it).
    public var value: Node {
        get { valueFromText?.value ?? storedValue }
        set { storedValue = newValue; valueFromText = nil }
        // In place: a get and a set would copy the node's storage (as `WriteResult.value`).
        _modify {
            if let patch = valueFromText { storedValue = patch.value; valueFromText = nil }
            yield &storedValue
        }
    }
    /// The path's version after the write (when not applied: the current one); REST's ETag.
    public var version: UInt64
    /// A stamped write its writer had already run: answered as the first time, not applied again.
    public var duplicate = false
    private var storedValue: Node
    private var valueFromText: TextPatch?

    public init(index: UInt64, applied: Bool, value: Node, version: UInt64, duplicate: Bool = false) {
        self.index = index
        self.applied = applied
        self.storedValue = value
        self.version = version
        self.duplicate = duplicate
    }

    /// An applied write whose value is built from `patch` when read.
    public init(index: UInt64, valueFrom patch: TextPatch, version: UInt64, duplicate: Bool = false) {
        self.init(index: index, applied: true, value: .empty, version: version, duplicate: duplicate)
        valueFromText = patch
    }
}

/// One committed write as listeners see it: resolved values (server values already computed).
public struct CommittedChange: Sendable {
    public enum Kind: Sendable {
        case set(Node)
        case merge([(Path, Node)])
    }

    public var index: UInt64
    public var namespace: String
    public var path: Path
    public var kind: Kind

    public init(index: UInt64, namespace: String, path: Path, kind: Kind) {
        self.index = index
        self.namespace = namespace
        self.path = path
        self.kind = kind
    }
}

/// A consistent read: the data and the log index the snapshot reflects.
public struct ReadResult: Sendable {
    public var node: Node
    /// The path's version (REST's ETag is made of it).
    public var version: UInt64
    public var appliedIndex: UInt64

    public init(node: Node, version: UInt64, appliedIndex: UInt64) {
        self.node = node
        self.version = version
        self.appliedIndex = appliedIndex
    }
}

/// Location pattern (may hold `$wildcard` segments) and the index names defined there.
public struct IndexDefinition: Sendable, Equatable {
    public var pattern: [String]
    public var indexes: [String]

    public init(pattern: [String], indexes: [String]) {
        self.pattern = pattern
        self.indexes = indexes
    }
}
