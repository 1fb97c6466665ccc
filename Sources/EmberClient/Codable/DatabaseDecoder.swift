import EmberCore
import Foundation

/// Decodes database values into `Decodable` types (FirebaseDatabaseSwift's `Database.Decoder`),
/// the counterpart of `DatabaseEncoder` with the same strategies and defaults (those of
/// `JSONDecoder`: dates `.deferredToDate`, data `.base64`, keys `.useDefaultKeys`, non-finite
/// floats `.throw`).
///
/// The database has no empty collections and turns objects with keys 0…n into arrays, so the
/// decoder is lenient where the stored shape cannot tell: a missing or null value decodes as an
/// empty array, set or dictionary; an array decodes into a keyed container (its indices are the
/// keys, e.g. `[Int: T]`), and an object whose keys are all integers into an unkeyed one (a sparse
/// array, elements in index order). Missing fields of optional properties decode as nil.
public final class DatabaseDecoder {
    public enum DateDecodingStrategy {
        /// `Date`'s own decoding: seconds since 2001-01-01 00:00 UTC. The default.
        case deferredToDate
        case secondsSince1970
        case millisecondsSince1970
        case iso8601
        case formatted(DateFormatter)
        case custom((any Swift.Decoder) throws -> Date)
    }

    public enum DataDecodingStrategy {
        case deferredToData
        /// A Base64 string. The default.
        case base64
        case custom((any Swift.Decoder) throws -> Data)
    }

    public enum NonConformingFloatDecodingStrategy {
        case `throw`
        case convertFromString(positiveInfinity: String, negativeInfinity: String, nan: String)
    }

    public enum KeyDecodingStrategy {
        case useDefaultKeys
        /// Stored `snake_case_key` is read as `snakeCaseKey`.
        case convertFromSnakeCase
        /// Maps the coding path (ending with the stored key) to the key the type asks for.
        case custom((_ codingPath: [any CodingKey]) -> any CodingKey)
    }

    public var dateDecodingStrategy: DateDecodingStrategy = .deferredToDate
    public var dataDecodingStrategy: DataDecodingStrategy = .base64
    public var nonConformingFloatDecodingStrategy: NonConformingFloatDecodingStrategy = .throw
    public var keyDecodingStrategy: KeyDecodingStrategy = .useDefaultKeys
    /// Passed to every `init(from:)` as `decoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: Any] = [:]

    public init() {}

    /// Decodes a value in the shapes `DataSnapshot.value` has (`[String: Any]`, `[Any]`, `String`,
    /// `NSNumber`, `Bool`, `NSNull`); nil or `NSNull` is "no data".
    public func decode<T: Decodable>(_ type: T.Type, from structure: Any) throws -> T {
        let json: JSON
        do { json = try ValueConverter.json(from: structure) } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "Not a database value: \(error)"))
        }
        return try decode(type, fromJSON: json)
    }

    func decode<T: Decodable>(_ type: T.Type, fromJSON json: JSON) throws -> T {
        let options = DecoderOptions(date: dateDecodingStrategy, data: dataDecodingStrategy,
                                     floats: nonConformingFloatDecodingStrategy, keys: keyDecodingStrategy, userInfo: userInfo)
        return try ValueDecoder(json: json, codingPath: [], options: options).unbox(type, json, codingPath: [])
    }
}

struct DecoderOptions {
    var date: DatabaseDecoder.DateDecodingStrategy
    var data: DatabaseDecoder.DataDecodingStrategy
    var floats: DatabaseDecoder.NonConformingFloatDecodingStrategy
    var keys: DatabaseDecoder.KeyDecodingStrategy
    var userInfo: [CodingUserInfoKey: Any]
}

/// Collections the database cannot store empty: read back as empty when absent.
protocol EmptyWhenAbsent {
    static var emptyValue: Self { get }
}

extension Array: EmptyWhenAbsent where Element: Decodable { static var emptyValue: Self { [] } }
extension Set: EmptyWhenAbsent where Element: Decodable { static var emptyValue: Self { [] } }
extension Dictionary: EmptyWhenAbsent where Key: Decodable, Value: Decodable { static var emptyValue: Self { [:] } }

/// `[String: T]` is data: its keys are read as stored, whatever the key strategy.
private protocol StringKeyedDecodable {
    static func decodeEntries(_ entries: KeyMap<JSON>, decoder: ValueDecoder) throws -> Self
}

extension Dictionary: StringKeyedDecodable where Key == String, Value: Decodable {
    fileprivate static func decodeEntries(_ entries: KeyMap<JSON>, decoder: ValueDecoder) throws -> Self {
        var out: [String: Value] = [:]
        for (k, v) in entries {
            out[k] = try decoder.unbox(Value.self, v, codingPath: decoder.codingPath + [AnyCodingKey(stringValue: k)])
        }
        return out
    }
}

/// The `Swift.Decoder` handed to `init(from:)`: reads one JSON value.
struct ValueDecoder: Swift.Decoder {
    let json: JSON
    let codingPath: [any CodingKey]
    let options: DecoderOptions
    var userInfo: [CodingUserInfoKey: Any] { options.userInfo }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        var entries: KeyMap<JSON>
        switch json {
        case .object(let o): entries = o
        case .array(let a):
            entries = [:]
            for (i, v) in a.enumerated() where !v.isNull { entries[String(i)] = v }
        case .null:
            throw DecodingError.valueNotFound([String: Any].self, .init(codingPath: codingPath, debugDescription: "Expected an object but found no data."))
        default:
            throw mismatch([String: Any].self, json)
        }
        switch options.keys {
        case .useDefaultKeys: break
        case .convertFromSnakeCase:
            entries = KeyMap(Dictionary(entries.map { (KeyCase.camel(fromSnake: $0.key), $0.value) }, uniquingKeysWith: { a, _ in a }))
        case .custom(let convert):
            entries = KeyMap(Dictionary(entries.map { (convert(codingPath + [AnyCodingKey(stringValue: $0.key)]).stringValue, $0.value) },
                                        uniquingKeysWith: { a, _ in a }))
        }
        return KeyedDecodingContainer(KeyedValueDecoder<Key>(decoder: self, entries: entries))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        UnkeyedValueDecoder(decoder: self, elements: try elements())
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { SingleValueDecoder(decoder: self) }

    /// The value as a list: an array, an object with integer keys (in index order), or nothing.
    private func elements() throws -> [JSON] {
        switch json {
        case .array(let a): return a
        case .null: return []
        case .object(let o):
            var indexed: [(Int, JSON)] = []
            for (k, v) in o {
                guard let i = Int(k), i >= 0, String(i) == k else { throw mismatch([Any].self, json) }
                indexed.append((i, v))
            }
            return indexed.sorted { $0.0 < $1.0 }.map(\.1)
        default: throw mismatch([Any].self, json)
        }
    }

    func mismatch(_ type: Any.Type, _ value: JSON, at path: [any CodingKey]? = nil) -> DecodingError {
        let found: String
        switch value {
        case .null: found = "no data"
        case .bool: found = "a boolean"
        case .int, .double: found = "a number"
        case .string: found = "a string"
        case .array: found = "an array"
        case .object: found = "an object"
        }
        return .typeMismatch(type, .init(codingPath: path ?? codingPath, debugDescription: "Expected to decode \(type) but found \(found) instead."))
    }

    // MARK: - Values

    /// Decodes `type` from `value` at `codingPath`: types with a database form of their own
    /// (primitives, dates, data, URLs, decimals, string-keyed dictionaries, empty collections)
    /// directly, anything else by its `init(from:)`.
    func unbox<T: Decodable>(_ type: T.Type, _ value: JSON, codingPath: [any CodingKey]) throws -> T {
        if value.isNull, let empty = T.self as? any EmptyWhenAbsent.Type { return empty.emptyValue as! T }
        let sub = ValueDecoder(json: value, codingPath: codingPath, options: options)
        switch T.self {
        case is String.Type: return try sub.string() as! T
        case is Bool.Type: return try sub.bool() as! T
        case is Int.Type: return try sub.integer(Int.self) as! T
        case is Double.Type: return try sub.double() as! T
        case is Date.Type: return try sub.date() as! T
        case is Data.Type: return try sub.data() as! T
        case is URL.Type:
            guard let url = URL(string: try sub.string()) else {
                throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "Invalid URL string."))
            }
            return url as! T
        case is Decimal.Type: return Decimal(try sub.double()) as! T
        default: break
        }
        if let dict = T.self as? any StringKeyedDecodable.Type {
            var entries: KeyMap<JSON> = [:]
            switch value {
            case .object(let o): entries = o.filter { !$0.value.isNull }
            // Keys "0"…"n" come back as an array.
            case .array(let a): for (i, v) in a.enumerated() where !v.isNull { entries[String(i)] = v }
            default: throw mismatch(T.self, value, at: codingPath)
            }
            return try dict.decodeEntries(entries, decoder: sub) as! T
        }
        return try T(from: sub)
    }

    func notFound(_ type: Any.Type) -> DecodingError {
        .valueNotFound(type, .init(codingPath: codingPath, debugDescription: "Expected \(type) but found no data."))
    }

    func bool() throws -> Bool {
        switch json {
        case .bool(let b): return b
        case .null: throw notFound(Bool.self)
        default: throw mismatch(Bool.self, json)
        }
    }

    func string() throws -> String {
        switch json {
        case .string(let s): return s
        case .null: throw notFound(String.self)
        default: throw mismatch(String.self, json)
        }
    }

    func double() throws -> Double {
        switch json {
        case .int(let i): return Double(i)
        case .double(let d): return d
        case .string(let s):
            if case .convertFromString(let posInf, let negInf, let nan) = options.floats {
                if s == posInf { return .infinity }
                if s == negInf { return -.infinity }
                if s == nan { return .nan }
            }
            throw mismatch(Double.self, json)
        case .null: throw notFound(Double.self)
        default: throw mismatch(Double.self, json)
        }
    }

    func float() throws -> Float {
        let d = try double()
        guard !d.isFinite || abs(d) <= Double(Float.greatestFiniteMagnitude) else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "Number \(d) does not fit in Float."))
        }
        return Float(d)
    }

    func integer<I: FixedWidthInteger>(_ type: I.Type) throws -> I {
        let fits: I?
        switch json {
        case .int(let i): fits = I(exactly: i)
        case .double(let d): fits = I(exactly: d)
        case .null: throw notFound(I.self)
        default: throw mismatch(I.self, json)
        }
        guard let fits else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "Number \(json.serialized()) does not fit in \(I.self)."))
        }
        return fits
    }

    func date() throws -> Date {
        switch options.date {
        case .deferredToDate: return try Date(from: self)
        case .secondsSince1970: return Date(timeIntervalSince1970: try double())
        case .millisecondsSince1970: return Date(timeIntervalSince1970: try double() / 1000)
        case .iso8601:
            guard let d = ISO8601DateFormatter().date(from: try string()) else {
                throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "Expected a date in ISO 8601 format."))
            }
            return d
        case .formatted(let formatter):
            guard let d = formatter.date(from: try string()) else {
                throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "Date string does not match the formatter's format."))
            }
            return d
        case .custom(let decode): return try decode(self)
        }
    }

    func data() throws -> Data {
        switch options.data {
        case .deferredToData: return try Data(from: self)
        case .base64:
            guard let d = Data(base64Encoded: try string()) else {
                throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "Expected Base64-encoded data."))
            }
            return d
        case .custom(let decode): return try decode(self)
        }
    }
}
