import EmberCore
import Foundation

/// Where one encoded value goes: a leaf, an object or an array whose children are slots too, so
/// nested containers can fill their part after the parent handed it out (Codable's model).
final class EncodingSlot {
    var leaf: JSON?
    var object: [String: EncodingSlot]?
    var array: [EncodingSlot]?

    /// nil when nothing was encoded; an empty container is an empty object (no data, as in the SDK).
    var json: JSON? {
        if let leaf { return leaf }
        if let object { return .object(KeyMap(object.mapValues { $0.json ?? .object([:]) })) }
        if let array { return .array(array.map { $0.json ?? .object([:]) }) }
        return nil
    }

    func makeObject(_ codingPath: [any CodingKey]) {
        if object != nil { return }
        precondition(leaf == nil && array == nil, "Requested a keyed container after encoding another kind of value at \(codingPath.map(\.stringValue))")
        object = [:]
    }

    func makeArray(_ codingPath: [any CodingKey]) {
        if array != nil { return }
        precondition(leaf == nil && object == nil, "Requested an unkeyed container after encoding another kind of value at \(codingPath.map(\.stringValue))")
        array = []
    }

    func child(_ key: String) -> EncodingSlot {
        let slot = EncodingSlot()
        object![key] = slot
        return slot
    }

    func append() -> EncodingSlot {
        let slot = EncodingSlot()
        array!.append(slot)
        return slot
    }
}

/// `[String: T]` is data: its keys are stored as they are, never converted by the key strategy.
private protocol StringKeyedEncodable {
    func encodeEntries(into slot: EncodingSlot, codingPath: [any CodingKey], options: EncoderOptions) throws
}

extension Dictionary: StringKeyedEncodable where Key == String, Value: Encodable {
    fileprivate func encodeEntries(into slot: EncodingSlot, codingPath: [any CodingKey], options: EncoderOptions) throws {
        slot.makeObject(codingPath)
        for (k, v) in self {
            try ValueEncoder.encode(v, into: slot.child(k), codingPath: codingPath + [AnyCodingKey(stringValue: k)], options: options)
        }
    }
}

/// The `Swift.Encoder` handed to `encode(to:)`: writes into one slot.
struct ValueEncoder: Swift.Encoder {
    let slot: EncodingSlot
    let codingPath: [any CodingKey]
    let options: EncoderOptions
    var userInfo: [CodingUserInfoKey: Any] { options.userInfo }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        slot.makeObject(codingPath)
        return KeyedEncodingContainer(KeyedValueEncoder<Key>(encoder: self, slot: slot))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        slot.makeArray(codingPath)
        return UnkeyedValueEncoder(encoder: self, slot: slot)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { SingleValueEncoder(encoder: self) }

    /// Encodes `value` into `slot`: types with a database form of their own (dates, data, URLs,
    /// decimals, string-keyed dictionaries, primitives) directly, anything else by its `encode(to:)`.
    static func encode<T: Encodable>(_ value: T, into slot: EncodingSlot, codingPath: [any CodingKey], options: EncoderOptions) throws {
        switch value {
        case let s as String: slot.leaf = .string(s)
        case let b as Bool: slot.leaf = .bool(b)
        case let i as Int: slot.leaf = .int(Int64(i))
        case let d as Double: slot.leaf = try number(d, codingPath, options)
        case let date as Date: try encode(date: date, into: slot, codingPath: codingPath, options: options)
        case let data as Data: try encode(data: data, into: slot, codingPath: codingPath, options: options)
        case let url as URL: slot.leaf = .string(url.absoluteString)
        case let decimal as Decimal: slot.leaf = try number(NSDecimalNumber(decimal: decimal).doubleValue, codingPath, options)
        case let dict as any StringKeyedEncodable: try dict.encodeEntries(into: slot, codingPath: codingPath, options: options)
        default: try value.encode(to: ValueEncoder(slot: slot, codingPath: codingPath, options: options))
        }
    }

    private static func encode(date: Date, into slot: EncodingSlot, codingPath: [any CodingKey], options: EncoderOptions) throws {
        switch options.date {
        case .deferredToDate: try date.encode(to: ValueEncoder(slot: slot, codingPath: codingPath, options: options))
        case .secondsSince1970: slot.leaf = try number(date.timeIntervalSince1970, codingPath, options)
        case .millisecondsSince1970: slot.leaf = try number(1000 * date.timeIntervalSince1970, codingPath, options)
        case .iso8601: slot.leaf = .string(ISO8601DateFormatter().string(from: date))
        case .formatted(let formatter): slot.leaf = .string(formatter.string(from: date))
        case .custom(let encode): try encode(date, ValueEncoder(slot: slot, codingPath: codingPath, options: options))
        }
    }

    private static func encode(data: Data, into slot: EncodingSlot, codingPath: [any CodingKey], options: EncoderOptions) throws {
        switch options.data {
        case .deferredToData: try data.encode(to: ValueEncoder(slot: slot, codingPath: codingPath, options: options))
        case .base64: slot.leaf = .string(data.base64EncodedString())
        case .custom(let encode): try encode(data, ValueEncoder(slot: slot, codingPath: codingPath, options: options))
        }
    }

    static func number(_ d: Double, _ codingPath: [any CodingKey], _ options: EncoderOptions) throws -> JSON {
        if d.isFinite { return .double(d) }
        guard case .convertToString(let posInf, let negInf, let nan) = options.floats else {
            throw EncodingError.invalidValue(d, .init(codingPath: codingPath,
                                                      debugDescription: "Unable to encode \(d) directly; the database stores finite numbers only. Use a nonConformingFloatEncodingStrategy of .convertToString to store it as a string."))
        }
        return .string(d.isNaN ? nan : d > 0 ? posInf : negInf)
    }

    static func integer<I: BinaryInteger>(_ i: I) -> JSON {
        if let v = Int64(exactly: i) { return .int(v) }
        return .double(Double(i))
    }

    /// The key stored for `key` under `codingPath`, by the key strategy.
    func storedKey(_ key: any CodingKey) -> String {
        switch options.keys {
        case .useDefaultKeys: return key.stringValue
        case .convertToSnakeCase: return KeyCase.snake(key.stringValue)
        case .custom(let convert): return convert(codingPath + [key]).stringValue
        }
    }
}

private struct KeyedValueEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: ValueEncoder
    let slot: EncodingSlot
    var codingPath: [any CodingKey] { encoder.codingPath }

    private func put(_ json: JSON, _ key: Key) { slot.child(encoder.storedKey(key)).leaf = json }

    mutating func encodeNil(forKey key: Key) throws { put(.null, key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { put(.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { put(.string(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { put(try ValueEncoder.number(value, codingPath + [key], encoder.options), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { put(try ValueEncoder.number(Double(value), codingPath + [key], encoder.options), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { put(ValueEncoder.integer(value), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { put(ValueEncoder.integer(value), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { put(ValueEncoder.integer(value), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { put(ValueEncoder.integer(value), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { put(ValueEncoder.integer(value), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { put(ValueEncoder.integer(value), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { put(ValueEncoder.integer(value), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { put(ValueEncoder.integer(value), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { put(ValueEncoder.integer(value), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { put(ValueEncoder.integer(value), key) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try ValueEncoder.encode(value, into: slot.child(encoder.storedKey(key)), codingPath: codingPath + [key], options: encoder.options)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        ValueEncoder(slot: slot.child(encoder.storedKey(key)), codingPath: codingPath + [key], options: encoder.options).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        ValueEncoder(slot: slot.child(encoder.storedKey(key)), codingPath: codingPath + [key], options: encoder.options).unkeyedContainer()
    }

    mutating func superEncoder() -> any Swift.Encoder {
        ValueEncoder(slot: slot.child(AnyCodingKey.super.stringValue), codingPath: codingPath + [AnyCodingKey.super], options: encoder.options)
    }

    mutating func superEncoder(forKey key: Key) -> any Swift.Encoder {
        ValueEncoder(slot: slot.child(encoder.storedKey(key)), codingPath: codingPath + [key], options: encoder.options)
    }
}

private struct UnkeyedValueEncoder: UnkeyedEncodingContainer {
    let encoder: ValueEncoder
    let slot: EncodingSlot
    var codingPath: [any CodingKey] { encoder.codingPath }
    var count: Int { slot.array?.count ?? 0 }
    private var nextKey: AnyCodingKey { AnyCodingKey(intValue: count) }

    init(encoder: ValueEncoder, slot: EncodingSlot) {
        self.encoder = encoder
        self.slot = slot
    }

    private func put(_ json: JSON) { slot.append().leaf = json }

    mutating func encodeNil() throws { put(.null) }
    mutating func encode(_ value: Bool) throws { put(.bool(value)) }
    mutating func encode(_ value: String) throws { put(.string(value)) }
    mutating func encode(_ value: Double) throws { put(try ValueEncoder.number(value, codingPath + [nextKey], encoder.options)) }
    mutating func encode(_ value: Float) throws { put(try ValueEncoder.number(Double(value), codingPath + [nextKey], encoder.options)) }
    mutating func encode(_ value: Int) throws { put(ValueEncoder.integer(value)) }
    mutating func encode(_ value: Int8) throws { put(ValueEncoder.integer(value)) }
    mutating func encode(_ value: Int16) throws { put(ValueEncoder.integer(value)) }
    mutating func encode(_ value: Int32) throws { put(ValueEncoder.integer(value)) }
    mutating func encode(_ value: Int64) throws { put(ValueEncoder.integer(value)) }
    mutating func encode(_ value: UInt) throws { put(ValueEncoder.integer(value)) }
    mutating func encode(_ value: UInt8) throws { put(ValueEncoder.integer(value)) }
    mutating func encode(_ value: UInt16) throws { put(ValueEncoder.integer(value)) }
    mutating func encode(_ value: UInt32) throws { put(ValueEncoder.integer(value)) }
    mutating func encode(_ value: UInt64) throws { put(ValueEncoder.integer(value)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        let key = nextKey
        try ValueEncoder.encode(value, into: slot.append(), codingPath: codingPath + [key], options: encoder.options)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let key = nextKey
        return ValueEncoder(slot: slot.append(), codingPath: codingPath + [key], options: encoder.options).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let key = nextKey
        return ValueEncoder(slot: slot.append(), codingPath: codingPath + [key], options: encoder.options).unkeyedContainer()
    }

    mutating func superEncoder() -> any Swift.Encoder {
        let key = nextKey
        return ValueEncoder(slot: slot.append(), codingPath: codingPath + [key], options: encoder.options)
    }
}

private struct SingleValueEncoder: SingleValueEncodingContainer {
    let encoder: ValueEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    private func put(_ json: JSON) {
        precondition(encoder.slot.leaf == nil && encoder.slot.object == nil && encoder.slot.array == nil,
                     "A single value container can encode only one value (at \(codingPath.map(\.stringValue)))")
        encoder.slot.leaf = json
    }

    mutating func encodeNil() throws { put(.null) }
    mutating func encode(_ value: Bool) throws { put(.bool(value)) }
    mutating func encode(_ value: String) throws { put(.string(value)) }
    mutating func encode(_ value: Double) throws { put(try ValueEncoder.number(value, codingPath, encoder.options)) }
    mutating func encode(_ value: Float) throws { put(try ValueEncoder.number(Double(value), codingPath, encoder.options)) }
    mutating func encode(_ value: Int) throws { put(ValueEncoder.integer(value)) }
    mutating func encode(_ value: Int8) throws { put(ValueEncoder.integer(value)) }
    mutating func encode(_ value: Int16) throws { put(ValueEncoder.integer(value)) }
    mutating func encode(_ value: Int32) throws { put(ValueEncoder.integer(value)) }
    mutating func encode(_ value: Int64) throws { put(ValueEncoder.integer(value)) }
    mutating func encode(_ value: UInt) throws { put(ValueEncoder.integer(value)) }
    mutating func encode(_ value: UInt8) throws { put(ValueEncoder.integer(value)) }
    mutating func encode(_ value: UInt16) throws { put(ValueEncoder.integer(value)) }
    mutating func encode(_ value: UInt32) throws { put(ValueEncoder.integer(value)) }
    mutating func encode(_ value: UInt64) throws { put(ValueEncoder.integer(value)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try ValueEncoder.encode(value, into: encoder.slot, codingPath: codingPath, options: encoder.options)
    }
}
