/// Writes one JSON document piece by piece, byte for byte as `JSON.serializedBytes` would write
/// the whole value (same separators, same pretty indentation): a reader that walks stored data in
/// key order (a streamed REST read) emits containers and keys as it goes and takes the bytes out
/// (`take`) whenever it has enough, so the document never exists whole in memory.
///
/// The caller emits object keys in Firebase key order (the order `JSONWriter` sorts them into);
/// the writer only checks the nesting.
public struct JSONStreamWriter: Sendable {
    public private(set) var out: [UInt8] = []
    public let pretty: Bool
    /// Open containers: whether each is an array, and how many members it has so far.
    private var stack: [(isArray: Bool, count: Int)] = []
    /// A key was written and its value has not been.
    private var awaitingValue = false

    public init(pretty: Bool) {
        self.pretty = pretty
    }

    /// Open containers.
    public var depth: Int { stack.count }

    /// Starts an object as the next value.
    public mutating func beginObject() { open(isArray: false) }

    /// Starts an array as the next value.
    public mutating func beginArray() { open(isArray: true) }

    /// The next member of the innermost object: its key (its value follows).
    public mutating func key(_ k: String) {
        precondition(!awaitingValue && stack.last?.isArray == false, "a key belongs in an object, before its value")
        separate()
        JSONWriter.writeString(k, into: &out)
        out.append(contentsOf: pretty ? [0x20, 0x3A, 0x20] : [0x3A])  // " : " or ":"
        awaitingValue = true
    }

    /// The next member's key given by its (valid) UTF-8: the same bytes as `key(_:)` of that
    /// string, for a reader that holds keys as stored bytes (no `String` made per key).
    public mutating func key(utf8: UnsafeBufferPointer<UInt8>) {
        precondition(!awaitingValue && stack.last?.isArray == false, "a key belongs in an object, before its value")
        separate()
        JSONWriter.writeString(utf8: utf8, into: &out)
        out.append(contentsOf: pretty ? [0x20, 0x3A, 0x20] : [0x3A])
        awaitingValue = true
    }

    /// A scalar value (string, number, boolean, null) that `write` appends to the output as
    /// `JSON.serializedBytes` would write it, with the `append…` helpers below: scalars look
    /// the same pretty or compact, so any writer takes them.
    public mutating func scalar<E: Error>(_ write: (inout [UInt8]) throws(E) -> Void) throws(E) {
        place()
        try write(&out)
    }

    /// A JSON string of the (valid) UTF-8 `utf8`, quoted and escaped.
    public static func appendString(utf8: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        JSONWriter.writeString(utf8: utf8, into: &out)
    }

    /// Numbers and booleans as `JSON.int`, `.double` and `.bool` serialize.
    public static func appendInt(_ i: Int64, to out: inout [UInt8]) { out.append(contentsOf: String(i).utf8) }
    public static func appendDouble(_ d: Double, to out: inout [UInt8]) { out.append(contentsOf: JSONWriter.formatDouble(d).utf8) }
    public static func appendBool(_ b: Bool, to out: inout [UInt8]) { out.append(contentsOf: (b ? "true" : "false").utf8) }

    /// A whole value: the document itself, an object member's after its key, or an array element.
    public mutating func value(_ v: JSON) {
        place()
        JSONWriter.write(v, into: &out, pretty: pretty, indent: stack.count)
    }

    /// A whole value already serialized compactly (`JSON.serializedBytes`), copied as it is.
    public mutating func value(serialized bytes: [UInt8]) {
        precondition(!pretty, "serialized values are compact")
        place()
        out += bytes
    }

    /// Bytes a compact object member `"key":value` takes (its separating comma not counted), for
    /// a writer that bounds a document's size before it adds the member.
    public static func memberSize(key: String, valueBytes: Int) -> Int {
        var k: [UInt8] = []
        JSONWriter.writeString(key, into: &k)
        return k.count + 1 + valueBytes
    }

    /// Ends the innermost container.
    public mutating func end() {
        precondition(!awaitingValue, "a key without its value")
        guard let top = stack.popLast() else { preconditionFailure("end without an open container") }
        if pretty && top.count > 0 { JSONWriter.newline(&out, stack.count) }
        out.append(top.isArray ? 0x5D : 0x7D)
    }

    /// `s` as a JSON string (quoted and escaped as everywhere in Ember).
    public static func appendString(_ s: String, to out: inout [UInt8]) { JSONWriter.writeString(s, into: &out) }

    /// The bytes written since the last call.
    /// Room for `bytes` of output up front (a writer filled to a known size: no regrowth).
    public mutating func reserveCapacity(_ bytes: Int) { out.reserveCapacity(bytes) }

    public mutating func take() -> [UInt8] {
        defer { out.removeAll(keepingCapacity: true) }
        return out
    }

    private mutating func open(isArray: Bool) {
        place()
        out.append(isArray ? 0x5B : 0x7B)
        stack.append((isArray, 0))
    }

    /// Where a value goes: after its key in an object (already separated), or as the next array
    /// element (separated here), or as the document.
    private mutating func place() {
        if awaitingValue {
            awaitingValue = false
        } else if let top = stack.last {
            precondition(top.isArray, "an object member needs its key first")
            separate()
        }
    }

    private mutating func separate() {
        let i = stack.count - 1
        if stack[i].count > 0 { out.append(0x2C) }
        stack[i].count += 1
        if pretty { JSONWriter.newline(&out, stack.count) }
    }
}
