import EmberCore
import Foundation

struct KeyedValueDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: ValueDecoder
    /// Keys already converted by the key strategy.
    let entries: KeyMap<JSON>
    var codingPath: [any CodingKey] { decoder.codingPath }
    var allKeys: [Key] { entries.keys.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { entries[key.stringValue].map { !$0.isNull } ?? false }

    /// A missing field reads as null: the database stores no nulls.
    func decodeNil(forKey key: Key) throws -> Bool { entries[key.stringValue]?.isNull ?? true }

    private func value(_ key: Key, _ type: Any.Type) throws -> ValueDecoder {
        guard let v = entries[key.stringValue], !v.isNull else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "No value for key \"\(key.stringValue)\"."))
        }
        return ValueDecoder(json: v, codingPath: codingPath + [key], options: decoder.options)
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try value(key, type).bool() }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try value(key, type).string() }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try value(key, type).double() }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try value(key, type).float() }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try value(key, type).integer(type) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try value(key, type).integer(type) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try value(key, type).integer(type) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try value(key, type).integer(type) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try value(key, type).integer(type) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try value(key, type).integer(type) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try value(key, type).integer(type) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try value(key, type).integer(type) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try value(key, type).integer(type) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try value(key, type).integer(type) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        let stored = entries[key.stringValue] ?? .null
        if stored.isNull, T.self as? any EmptyWhenAbsent.Type == nil {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "No value for key \"\(key.stringValue)\"."))
        }
        return try decoder.unbox(type, stored, codingPath: codingPath + [key])
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try value(key, [String: Any].self).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try ValueDecoder(json: entries[key.stringValue] ?? .null, codingPath: codingPath + [key], options: decoder.options).unkeyedContainer()
    }

    func superDecoder() throws -> any Swift.Decoder {
        ValueDecoder(json: entries[AnyCodingKey.super.stringValue] ?? .null, codingPath: codingPath + [AnyCodingKey.super], options: decoder.options)
    }

    func superDecoder(forKey key: Key) throws -> any Swift.Decoder {
        ValueDecoder(json: entries[key.stringValue] ?? .null, codingPath: codingPath + [key], options: decoder.options)
    }
}

struct UnkeyedValueDecoder: UnkeyedDecodingContainer {
    let decoder: ValueDecoder
    let elements: [JSON]
    private(set) var currentIndex = 0
    var codingPath: [any CodingKey] { decoder.codingPath }
    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    init(decoder: ValueDecoder, elements: [JSON]) {
        self.decoder = decoder
        self.elements = elements
    }

    private mutating func next(_ type: Any.Type) throws -> ValueDecoder {
        let path = codingPath + [AnyCodingKey(intValue: currentIndex)]
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(type, .init(codingPath: path, debugDescription: "Unkeyed container is at end."))
        }
        defer { currentIndex += 1 }
        return ValueDecoder(json: elements[currentIndex], codingPath: path, options: decoder.options)
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(Any?.self, .init(codingPath: codingPath, debugDescription: "Unkeyed container is at end."))
        }
        if elements[currentIndex].isNull {
            currentIndex += 1
            return true
        }
        return false
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next(type).bool() }
    mutating func decode(_ type: String.Type) throws -> String { try next(type).string() }
    mutating func decode(_ type: Double.Type) throws -> Double { try next(type).double() }
    mutating func decode(_ type: Float.Type) throws -> Float { try next(type).float() }
    mutating func decode(_ type: Int.Type) throws -> Int { try next(type).integer(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next(type).integer(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next(type).integer(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next(type).integer(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next(type).integer(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next(type).integer(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next(type).integer(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next(type).integer(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next(type).integer(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next(type).integer(type) }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let sub = try next(type)
        return try decoder.unbox(type, sub.json, codingPath: sub.codingPath)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next([String: Any].self).container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try next([Any].self).unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Swift.Decoder { try next(Any.self) }
}

struct SingleValueDecoder: SingleValueDecodingContainer {
    let decoder: ValueDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }

    func decodeNil() -> Bool { decoder.json.isNull }
    func decode(_ type: Bool.Type) throws -> Bool { try decoder.bool() }
    func decode(_ type: String.Type) throws -> String { try decoder.string() }
    func decode(_ type: Double.Type) throws -> Double { try decoder.double() }
    func decode(_ type: Float.Type) throws -> Float { try decoder.float() }
    func decode(_ type: Int.Type) throws -> Int { try decoder.integer(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try decoder.integer(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try decoder.integer(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try decoder.integer(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try decoder.integer(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try decoder.integer(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try decoder.integer(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try decoder.integer(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try decoder.integer(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try decoder.integer(type) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.unbox(type, decoder.json, codingPath: codingPath) }
}
