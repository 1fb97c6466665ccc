import EmberCore
import Foundation

/// Encodes `Encodable` values into database values (FirebaseDatabaseSwift's `Database.Encoder`).
///
/// Structs and classes become objects; arrays become Firebase arrays (stored as children `0`,
/// `1`, …); optionals that are nil are left out (synthesized `Encodable` skips them), so the
/// field is absent in the database. The strategies and their defaults are the SDK's (those of
/// `JSONEncoder`): dates `.deferredToDate` (seconds since 2001-01-01, a `Double`), data
/// `.base64`, keys `.useDefaultKeys`, non-finite floats `.throw`. `[String: T]` dictionaries keep
/// their keys as they are whatever the key strategy (as `JSONEncoder` does): they are data.
/// Use with `DatabaseReference.setValue(from:)`; `ServerTimestamp` writes server timestamps.
public final class DatabaseEncoder {
    public enum DateEncodingStrategy {
        /// `Date`'s own encoding: seconds since 2001-01-01 00:00 UTC as a `Double`. The default.
        case deferredToDate
        case secondsSince1970
        case millisecondsSince1970
        /// An ISO 8601 / RFC 3339 string (`2024-05-01T12:00:00Z`).
        case iso8601
        case formatted(DateFormatter)
        /// The closure encodes the date; if it encodes nothing, an empty object (no data) is stored.
        case custom((Date, any Swift.Encoder) throws -> Void)
    }

    public enum DataEncodingStrategy {
        /// `Data`'s own encoding: an array of byte values.
        case deferredToData
        /// A Base64 string. The default.
        case base64
        case custom((Data, any Swift.Encoder) throws -> Void)
        // The SDK's `.blob` (an NSData value) is left out: the database cannot store binary values.
    }

    public enum NonConformingFloatEncodingStrategy {
        /// Infinity and NaN fail the encoding. The default (the database stores finite numbers only).
        case `throw`
        case convertToString(positiveInfinity: String, negativeInfinity: String, nan: String)
    }

    public enum KeyEncodingStrategy {
        case useDefaultKeys
        /// `camelCaseKey` → `camel_case_key`, `myURLValue` → `my_url_value`.
        case convertToSnakeCase
        /// Maps the full coding path to the key to store for its last element.
        case custom((_ codingPath: [any CodingKey]) -> any CodingKey)
    }

    public var dateEncodingStrategy: DateEncodingStrategy = .deferredToDate
    public var dataEncodingStrategy: DataEncodingStrategy = .base64
    public var nonConformingFloatEncodingStrategy: NonConformingFloatEncodingStrategy = .throw
    public var keyEncodingStrategy: KeyEncodingStrategy = .useDefaultKeys
    /// Passed to every `encode(to:)` as `encoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: Any] = [:]

    public init() {}

    /// The encoded value in the shapes `setValue` takes (`[String: Any]`, `[Any]`, `String`,
    /// `NSNumber`, `Bool`, `NSNull`), as the SDK's encoder returns it.
    public func encode<T: Encodable>(_ value: T) throws -> Any {
        ValueConverter.value(of: try encodeJSON(value))
    }

    /// The encoded value as the client's JSON model (what writes send).
    func encodeJSON<T: Encodable>(_ value: T) throws -> JSON {
        let options = EncoderOptions(date: dateEncodingStrategy, data: dataEncodingStrategy,
                                     floats: nonConformingFloatEncodingStrategy, keys: keyEncodingStrategy, userInfo: userInfo)
        let root = EncodingSlot()
        try ValueEncoder.encode(value, into: root, codingPath: [], options: options)
        guard let json = root.json else {
            throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: "Top-level \(T.self) did not encode any values."))
        }
        return json
    }
}

extension Database {
    /// FirebaseDatabaseSwift's name for the encoder `setValue(from:)` uses.
    public typealias Encoder = DatabaseEncoder
    /// FirebaseDatabaseSwift's name for the decoder `DataSnapshot.data(as:)` uses.
    public typealias Decoder = DatabaseDecoder
}

/// The encoder's settings, handed down to nested encoders.
struct EncoderOptions {
    var date: DatabaseEncoder.DateEncodingStrategy
    var data: DatabaseEncoder.DataEncodingStrategy
    var floats: DatabaseEncoder.NonConformingFloatEncodingStrategy
    var keys: DatabaseEncoder.KeyEncodingStrategy
    var userInfo: [CodingUserInfoKey: Any]
}

/// A key made from a string or an index (super encoders, array elements, custom strategies).
struct AnyCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue }
    init(intValue: Int) {
        stringValue = String(intValue)
        self.intValue = intValue
    }
    init(_ key: any CodingKey) {
        stringValue = key.stringValue
        intValue = key.intValue
    }
    static let `super` = AnyCodingKey(stringValue: "super")
}

/// Key conversions for the `convertToSnakeCase` / `convertFromSnakeCase` strategies.
enum KeyCase {
    /// Splits words where a lower-case letter or digit meets an upper-case one, and before the
    /// last capital of a run followed by a lower-case letter (`myURLValue` → `my_url_value`).
    static func snake(_ key: String) -> String {
        let chars = Array(key)
        var out = ""
        for (i, c) in chars.enumerated() {
            if c.isUppercase, i > 0 {
                let prev = chars[i - 1]
                let nextIsLower = i + 1 < chars.count && chars[i + 1].isLowercase
                if prev.isLowercase || prev.isNumber || (prev.isUppercase && nextIsLower) { out.append("_") }
            }
            out += c.lowercased()
        }
        return out
    }

    /// `one_two_three` → `oneTwoThree`; leading and trailing underscores stay; a key without
    /// inner underscores is unchanged.
    static func camel(fromSnake key: String) -> String {
        let leading = key.prefix { $0 == "_" }.count
        let trailing = key.reversed().prefix { $0 == "_" }.count
        guard leading + trailing < key.count else { return key }
        let core = key.dropFirst(leading).dropLast(trailing)
        let words = core.split(separator: "_")
        guard words.count > 1 else { return key }
        var out = String(repeating: "_", count: leading) + words[0]
        for w in words.dropFirst() { out += w.prefix(1).uppercased() + w.dropFirst().lowercased() }
        return out + String(repeating: "_", count: trailing)
    }
}
