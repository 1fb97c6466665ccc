/// A string compared and hashed by its UTF-8 bytes. Swift's `String` `==` and hashing follow
/// canonical equivalence, so `"\u{E9}"` (é, NFC) and `"e\u{301}"` (e + combining acute, NFD)
/// are one `String` key; Firebase keys are byte strings and keeps both (so does LMDB).
public struct ExactKey: Hashable, Sendable, CustomStringConvertible {
    public let string: String

    @inlinable public init(_ string: String) { self.string = string }

    @inlinable
    public static func == (a: ExactKey, b: ExactKey) -> Bool { a.string.isExactly(b.string) }

    @inlinable
    public func hash(into hasher: inout Hasher) {
        var s = string
        s.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    public var description: String { string }
}

extension String {
    /// Byte equality (Swift's `==` on String is canonical equivalence).
    /// Lengths first, then the two contiguous buffers: the generic walk over two UTF8Views was
    /// a visible share of a bulk write's time (every dictionary probe of a key compares).
    @inlinable
    public func isExactly(_ other: String) -> Bool {
        let a = utf8, b = other.utf8
        guard a.count == b.count else { return false }
        let fast = a.withContiguousStorageIfAvailable { pa in
            b.withContiguousStorageIfAvailable { pb in pa.elementsEqual(pb) }
        }
        if let fast, let same = fast { return same }
        return a.elementsEqual(b)
    }
}

/// A dictionary from keys to values whose keys are byte-exact (`ExactKey`), with the parts of
/// `Dictionary<String, Value>`'s interface the model uses: the children of a `Node`, the members
/// of a JSON object. Iteration order is unspecified, as a dictionary's.
public struct KeyMap<Value> {
    @usableFromInline var storage: [ExactKey: Value]

    @inlinable public init() { storage = [:] }
    @inlinable public init(minimumCapacity: Int) { storage = Dictionary(minimumCapacity: minimumCapacity) }

    /// Keys must be distinct (by bytes); a repeated key is a programming error, as in `Dictionary`.
    @inlinable
    public init<S: Sequence>(uniqueKeysWithValues pairs: S) where S.Element == (String, Value) {
        storage = Dictionary(uniqueKeysWithValues: pairs.lazy.map { (ExactKey($0.0), $0.1) })
    }

    // `_modify` yields the stored value in place, as Dictionary's subscripts do: with get/set
    // alone, `map[k]!.mutate()` would copy the value first (a nested tree at every level).
    @inlinable
    public subscript(key: String) -> Value? {
        get { storage[ExactKey(key)] }
        set { storage[ExactKey(key)] = newValue }
        _modify { yield &storage[ExactKey(key)] }
    }

    @inlinable
    public subscript(key: String, default defaultValue: @autoclosure () -> Value) -> Value {
        get { storage[ExactKey(key), default: defaultValue()] }
        set { storage[ExactKey(key), default: defaultValue()] = newValue }
        _modify { yield &storage[ExactKey(key), default: defaultValue()] }
    }

    @inlinable @discardableResult
    public mutating func removeValue(forKey key: String) -> Value? { storage.removeValue(forKey: ExactKey(key)) }

    @inlinable @discardableResult
    public mutating func updateValue(_ value: Value, forKey key: String) -> Value? {
        storage.updateValue(value, forKey: ExactKey(key))
    }

    @inlinable public mutating func reserveCapacity(_ n: Int) { storage.reserveCapacity(n) }
    @inlinable public mutating func removeAll() { storage.removeAll() }

    @inlinable public var keys: Keys { Keys(base: storage.keys) }
    @inlinable public var values: Dictionary<ExactKey, Value>.Values {
        get { storage.values }
        _modify { yield &storage.values }
    }

    @inlinable public func index(forKey key: String) -> Index? { storage.index(forKey: ExactKey(key)) }

    @inlinable
    public func mapValues<T>(_ transform: (Value) throws -> T) rethrows -> KeyMap<T> {
        KeyMap<T>(storage: try storage.mapValues(transform))
    }

    @inlinable
    public func compactMapValues<T>(_ transform: (Value) throws -> T?) rethrows -> KeyMap<T> {
        KeyMap<T>(storage: try storage.compactMapValues(transform))
    }

    @inlinable
    public func filter(_ isIncluded: ((key: String, value: Value)) throws -> Bool) rethrows -> KeyMap {
        KeyMap(storage: try storage.filter { try isIncluded((key: $0.key.string, value: $0.value)) })
    }

    @inlinable
    public mutating func merge(_ other: KeyMap, uniquingKeysWith combine: (Value, Value) throws -> Value) rethrows {
        try storage.merge(other.storage, uniquingKeysWith: combine)
    }

    @usableFromInline init(storage: [ExactKey: Value]) { self.storage = storage }

    /// The keys, as strings; `contains` is a hash lookup.
    public struct Keys: Collection {
        @usableFromInline let base: Dictionary<ExactKey, Value>.Keys
        @inlinable init(base: Dictionary<ExactKey, Value>.Keys) { self.base = base }
        public typealias Index = Dictionary<ExactKey, Value>.Keys.Index
        @inlinable public var startIndex: Index { base.startIndex }
        @inlinable public var endIndex: Index { base.endIndex }
        @inlinable public func index(after i: Index) -> Index { base.index(after: i) }
        @inlinable public subscript(i: Index) -> String { base[i].string }
        @inlinable public var count: Int { base.count }
        @inlinable public func contains(_ key: String) -> Bool { base.contains(ExactKey(key)) }
    }
}

extension KeyMap: Collection {
    public typealias Element = (key: String, value: Value)
    public typealias Index = Dictionary<ExactKey, Value>.Index
    @inlinable public var startIndex: Index { storage.startIndex }
    @inlinable public var endIndex: Index { storage.endIndex }
    @inlinable public func index(after i: Index) -> Index { storage.index(after: i) }
    @inlinable public subscript(i: Index) -> Element {
        let e = storage[i]
        return (key: e.key.string, value: e.value)
    }
    @inlinable public var count: Int { storage.count }
    @inlinable public var isEmpty: Bool { storage.isEmpty }
}

extension KeyMap: ExpressibleByDictionaryLiteral {
    /// Literal keys must be distinct by bytes.
    @inlinable
    public init(dictionaryLiteral elements: (String, Value)...) {
        self.init(uniqueKeysWithValues: elements)
    }
}

extension KeyMap: Equatable where Value: Equatable {
    @inlinable public static func == (a: KeyMap, b: KeyMap) -> Bool { a.storage == b.storage }
}

extension KeyMap: Hashable where Value: Hashable {
    @inlinable public func hash(into hasher: inout Hasher) { hasher.combine(storage) }
}

extension KeyMap: Sendable where Value: Sendable {}

extension KeyMap: CustomStringConvertible {
    public var description: String {
        "[" + map { "\($0.key.debugDescription): \($0.value)" }.joined(separator: ", ") + "]"
    }
}

extension KeyMap {
    /// A map holding `dictionary`'s pairs (keys already distinct as Swift strings are distinct by bytes).
    @inlinable
    public init(_ dictionary: [String: Value]) {
        storage = Dictionary(uniqueKeysWithValues: dictionary.lazy.map { (ExactKey($0.key), $0.value) })
    }

    /// As a Swift dictionary, for APIs that take one: keys equal under canonical equivalence merge
    /// there (which one survives is unspecified). Not for data paths.
    @inlinable
    public var lossyDictionary: [String: Value] {
        var d: [String: Value] = Dictionary(minimumCapacity: count)
        for (k, v) in self { d[k] = v }
        return d
    }
}
