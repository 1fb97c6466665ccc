import EmberCore
import Foundation

/// Conversion between the SDK's `Any` values and the JSON/Node model.
///
/// Values read from snapshots: `nil` for no data; `String`; `Bool`; numbers as `NSNumber` (so
/// both `as? Int` and `as? Double` work, as with the iOS SDK); objects as `[String: Any]`;
/// array-like objects (keys 0…n, more than half present) as `[Any]` with `NSNull` for holes.
/// Values written: `nil`/`NSNull`, `String`, `Bool`, any Swift integer or floating type,
/// `NSNumber`, `[String: Any]`, `[Any]`, `ServerValue` placeholders and `EmberCore.JSON`.
enum ValueConverter {
    static func json(from value: Any?) throws(DatabaseError) -> JSON {
        guard let value else { return .null }
        if let json = value as? JSON { return json }
        if value is NSNull { return .null }
        if let s = value as? String { return .string(s) }
        if let s = value as? Substring { return .string(String(s)) }
        // A real NSNumber carries its own type (bool, integer or floating).
        if type(of: value) is NSNumber.Type, let n = value as? NSNumber {
            let t = String(cString: n.objCType)
            if t == "c" || t == "B" { return .bool(n.boolValue) }
            if t == "f" || t == "d" { return try finite(n.doubleValue) }
            return .int(n.int64Value)
        }
        // Plain casts also unwrap values boxed as AnyObject (`x as AnyObject`, as the SDK's
        // samples write); Bool first: Swift does not cast between Bool and integers.
        switch value {
        case let v as Bool: return .bool(v)
        case let v as Int: return .int(Int64(v))
        case let v as Int64: return .int(v)
        case let v as Int32: return .int(Int64(v))
        case let v as Int16: return .int(Int64(v))
        case let v as Int8: return .int(Int64(v))
        case let v as UInt: return number(UInt64(v))
        case let v as UInt64: return number(v)
        case let v as UInt32: return .int(Int64(v))
        case let v as UInt16: return .int(Int64(v))
        case let v as UInt8: return .int(Int64(v))
        case let v as Double: return try finite(v)
        case let v as Float: return try finite(Double(v))
        default: break
        }
        if let dict = value as? [String: Any] {
            var o: KeyMap<JSON> = [:]
            for (k, v) in dict { o[k] = try json(from: v) }
            return .object(o)
        }
        if let dict = value as? [AnyHashable: Any] {
            var o: KeyMap<JSON> = [:]
            for (k, v) in dict {
                guard let key = k.base as? String else { throw DatabaseError(code: .invalidData, message: "Keys must be strings: \(k)") }
                o[key] = try json(from: v)
            }
            return .object(o)
        }
        if let array = value as? [Any] { return .array(try array.map { v throws(DatabaseError) in try json(from: v) }) }
        if let array = value as? [Any?] { return .array(try array.map { v throws(DatabaseError) in try json(from: v) }) }
        throw DatabaseError(code: .invalidData, message: "Cannot store a value of type \(type(of: value))")
    }

    private static func number(_ v: UInt64) -> JSON { v <= UInt64(Int64.max) ? .int(Int64(v)) : .double(Double(v)) }

    private static func finite(_ d: Double) throws(DatabaseError) -> JSON {
        guard d.isFinite else { throw DatabaseError(code: .invalidData, message: "Numbers must be finite") }
        return .double(d)
    }

    /// A node's value in the SDK's shape (priorities dropped).
    static func value(of node: Node) -> Any? {
        node.isEmpty ? nil : value(of: node.toJSON())
    }

    static func value(of json: JSON) -> Any {
        switch json {
        case .null: return NSNull()
        case .bool(let b): return b
        case .int(let i): return NSNumber(value: i)
        case .double(let d): return NSNumber(value: d)
        case .string(let s): return s
        case .array(let a): return a.map { value(of: $0) }
        // An app's [String: Any]: keys equal as Swift strings (NFC/NFD spellings) merge here only.
        case .object(let o): return o.mapValues { value(of: $0) }.lossyDictionary
        }
    }

    static func priorityValue(_ p: Priority?) -> Any? {
        switch p {
        case nil: return nil
        case .number(let d)?: return NSNumber(value: d)
        case .string(let s)?: return s
        }
    }

    /// A priority given to the API: a number, a string or nil.
    static func priorityJSON(_ value: Any?) throws(DatabaseError) -> JSON {
        let j = try json(from: value)
        switch j {
        case .null, .int, .double, .string: return j
        default: throw DatabaseError(code: .invalidData, message: "A priority must be a number, a string or nil")
        }
    }

    /// `value` with `priority` attached, in the export shape the wire and `Node(json:)` accept.
    static func json(value: Any?, priority: Any?) throws(DatabaseError) -> JSON {
        let v = try json(from: value)
        let p = try priorityJSON(priority)
        if case .null = p { return v }
        switch v {
        case .object(var o) where o[".sv"] == nil:
            o[".priority"] = p
            return .object(o)
        case .array(let a):
            var o: KeyMap<JSON> = [:]
            for (i, x) in a.enumerated() where !x.isNull { o[String(i)] = x }
            o[".priority"] = p
            return .object(o)
        case .null: return .null
        default: return .object([".value": v, ".priority": p])
        }
    }
}
